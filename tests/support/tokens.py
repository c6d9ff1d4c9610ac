"""The tokens every app and server of the tests is configured with, and the headers that send them."""
from service.interface import TOKEN_HEADER

TOKEN = "test-token-default"
OTHER_TOKEN = "test-token-other"
TOKENS = f"default:{TOKEN},other:{OTHER_TOKEN}"
HEADERS = {TOKEN_HEADER: TOKEN}
OTHER_HEADERS = {TOKEN_HEADER: OTHER_TOKEN}
