"""Reading a ``/metrics`` answer in tests, with ``prometheus_client``'s own parser."""

from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families

Samples = dict[tuple[str, frozenset], float]


def parse(text: str) -> Samples:
    """Every sample of an exposition: (sample name, frozenset of label pairs) -> value."""
    samples: Samples = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            samples[(sample.name, frozenset(sample.labels.items()))] = sample.value
    return samples


def scrape(client, path: str = "/metrics", **headers) -> Samples:
    """GET ``path`` with a Django test client and parse it (asserting a 200)."""
    response = client.get(path, **headers)
    assert response.status_code == 200, response.content[:500]
    assert response["Content-Type"].startswith("text/plain; version=")
    return parse(response.content.decode())


def value(samples: Samples, name: str, **labels: str) -> float:
    """The sample ``name`` with exactly ``labels``; 0 when it is not exposed (a labelled
    counter has no sample before its first increment)."""
    return samples.get((name, frozenset(labels.items())), 0.0)


def names(samples: Samples) -> set[str]:
    """The sample names exposed."""
    return {name for name, _ in samples}


def family_names(text: str) -> set[str]:
    """Every sample name an exposition's families can hold, from their declared type (a
    labelled counter that has not counted yet still declares its family): a counter
    ``x`` holds ``x_total`` (and ``x_created``), a histogram ``x_bucket``, ``x_count``,
    ``x_sum``, a gauge ``x``."""
    suffixes = {
        "counter": ("_total", "_created"),
        "histogram": ("_bucket", "_count", "_sum", "_created"),
        "summary": ("", "_count", "_sum", "_created"),
        "gauge": ("",),
        "untyped": ("",),
    }
    found: set[str] = set()
    for family in text_string_to_metric_families(text):
        found.update(family.name + suffix for suffix in suffixes[family.type])
    return found
