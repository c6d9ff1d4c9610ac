"""Work a worker process does in the background for others: delivering webhooks (CONTRACT 15). `dispatcher` claims
what is due from the store and attempts it; `sender` makes one attempt's HTTP request to a checked address."""
