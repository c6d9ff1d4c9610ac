"""Standard Webhooks (standardwebhooks.com) as this service sends them (CONTRACT 15): the headers, the message id, and
the signature, which receivers check with the `standardwebhooks` library or by hand (docs/webhooks.md)."""
import base64
import hashlib
import hmac

ID_HEADER, TIMESTAMP_HEADER, SIGNATURE_HEADER = "webhook-id", "webhook-timestamp", "webhook-signature"
SECRET_PREFIX = "whsec_"


def message_id(org, seq):
    """`evt_<org>_<seq>`: the same on every attempt of an event, unique per org and event."""
    return f"evt_{org}_{seq}"


def signature(secret, msg_id, timestamp, body):
    """`v1,<base64 of HMAC-SHA256 over "<id>.<timestamp>.<body>">`, keyed with the base64 decoding of the secret after
    `whsec_`."""
    key = base64.b64decode(secret[len(SECRET_PREFIX):])
    digest = hmac.new(key, f"{msg_id}.{timestamp}.".encode() + body, hashlib.sha256).digest()
    return "v1," + base64.b64encode(digest).decode()


def signature_header(secrets, msg_id, timestamp, body):
    """The `webhook-signature` value: one `v1,` entry per secret that signs, space-separated."""
    return " ".join(signature(secret, msg_id, timestamp, body) for secret in secrets)
