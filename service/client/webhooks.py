"""Webhooks from the client (CONTRACT 15): subscribe, unsubscribe, list, read the delivery log, redeliver; a mixin of
service.client.Client, whose `graphql` it calls."""

SUBSCRIPTION_FIELDS = ("subscriptionID webhookUrl webhookHeaders types responseFragment secret createdAt disabledAt "
                       "disabledReason")
DELIVERY_FIELDS = "seq type state attempts lastStatus lastError lastAttemptAt nextAttemptAt"


class WebhookCalls:
    """The webhook methods of Client (each needs an admin token)."""

    def webhook_subscribe(self, subscription_id, url, headers=None, types=None, secret=None, fragment=None):
        """Subscribe `url` to the org's events (those of `types`, e.g. ["process.*"]; all when None): "SUBSCRIBED", or
        "UPDATED" for an id that exists (every setting replaced; `secret` None keeps the current one)."""
        subscription = {"subscriptionID": subscription_id, "webhookUrl": url, "webhookHeaders": headers,
                        "types": types, "secret": secret, "responseFragment": fragment}
        query = "mutation($input: SubscribeRequest_Input!) { webhookSubscribe(input: $input) }"
        return self.graphql(query, {"input": {key: value for key, value in subscription.items()
                                              if value is not None}})["webhookSubscribe"]

    def webhook_unsubscribe(self, subscription_id):
        """Remove a subscription, its retries and its log; ClientError (NOT_FOUND) for an unknown id."""
        query = "mutation($id: String!) { webhookUnsubscribe(subscriptionID: $id) }"
        return self.graphql(query, {"id": subscription_id})["webhookUnsubscribe"]

    def webhook_subscriptions(self):
        """The org's subscriptions (dicts of the WebhookSubscription fields), by id."""
        return self.graphql(f"{{ webhookSubscriptions {{ {SUBSCRIPTION_FIELDS} }} }}")["webhookSubscriptions"]

    def webhook_deliveries(self, subscription_id, first=100, before=None):
        """A page of a subscription's delivery log, newest event first (`before`: seqs below it)."""
        query = (f"query($id: String!, $first: Int, $before: Int) {{ webhookDeliveries(subscriptionID: $id, "
                 f"first: $first, before: $before) {{ {DELIVERY_FIELDS} }} }}")
        return self.graphql(query, {"id": subscription_id, "first": first, "before": before})["webhookDeliveries"]

    def webhook_redeliver(self, subscription_id, seq):
        """Send a logged delivery again now; the delivery as logged (PENDING)."""
        query = (f"mutation($id: String!, $seq: Int!) {{ webhookRedeliver(subscriptionID: $id, seq: $seq) "
                 f"{{ {DELIVERY_FIELDS} }} }}")
        return self.graphql(query, {"id": subscription_id, "seq": seq})["webhookRedeliver"]
