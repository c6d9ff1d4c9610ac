"""Reading the Prometheus text of GET /metrics."""
import re


def metric_value(text, name, **labels):
    """The value of one sample in Prometheus text, or 0 when absent."""
    for line in text.splitlines():
        match = re.fullmatch(r"(\w+)(?:\{(.*)\})? (\S+)", line)
        if not match or match.group(1) != name:
            continue
        found = dict(re.findall(r'(\w+)="([^"]*)"', match.group(2) or ""))
        if all(found.get(key) == value for key, value in labels.items()):
            return float(match.group(3))
    return 0.0
