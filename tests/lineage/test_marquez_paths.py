"""Reading Marquez's paths and node ids (``lineage.marquez.paths``, ``.nodes``): pure."""

from __future__ import annotations

import pytest

from lineage.marquez import nodes, paths
from lineage.marquez.paths import Route
from problems import ValidationProblem


@pytest.mark.parametrize(
    ("raw", "route"),
    [
        ("/api/v1/namespaces/s3%3A%2F%2Flake", Route(paths.NAMESPACE, "s3://lake")),
        ("/api/v1/namespaces/s3%3A%2F%2Flake/datasets?limit=5", Route(paths.DATASETS, "s3://lake")),
        (
            "/api/v1/namespaces/s3%3A%2F%2Flake/datasets/marts%2Fversions",
            Route(paths.DATASET, "s3://lake", "marts/versions"),
        ),
        (
            "/tidemark/api/v1/namespaces/ns/datasets/a%2Fb/versions/v1",
            Route(paths.DATASET_VERSION, "ns", "a/b", "v1"),
        ),
        ("/api/v1/namespaces/ns/jobs/j%2Fruns/runs", Route(paths.JOB_RUNS, "ns", "j/runs")),
    ],
)
def test_exact_routes_split_an_undecoded_path_on_its_slashes(raw, route):
    assert paths.exact_routes(raw) == [route]


@pytest.mark.parametrize(
    "raw", ["/api/v1/namespaces/ns/tags", "/api/v1/namespaces/ns/datasets/", "/api/v1/jobs"]
)
def test_exact_routes_names_nothing_for_other_paths(raw):
    assert paths.exact_routes(raw) == []


def test_candidate_routes_list_every_reading_of_a_decoded_path_most_specific_first():
    assert paths.candidate_routes("s3://lake/datasets/marts/daily/versions") == [
        Route(paths.DATASET_VERSIONS, "s3://lake", "marts/daily"),
        Route(paths.DATASET, "s3://lake", "marts/daily/versions"),
        Route(paths.NAMESPACE, "s3://lake/datasets/marts/daily/versions"),
    ]
    assert paths.candidate_routes("airflow://a/jobs") == [
        Route(paths.JOBS, "airflow://a"),
        Route(paths.NAMESPACE, "airflow://a/jobs"),
    ]
    assert paths.candidate_routes("") == []


def test_parse_node_id_lists_each_reading_longest_namespace_first():
    readings = nodes.parse_node_id("dataset:postgres://wh:5432:shop.public.orders")
    assert [(r.namespace, r.name) for r in readings] == [
        ("postgres://wh:5432", "shop.public.orders"),
        ("postgres://wh", "5432:shop.public.orders"),
        ("postgres", "//wh:5432:shop.public.orders"),
    ]
    field = nodes.parse_node_id("datasetField:s3://lake:marts/x:total#v1")[0]
    assert (field.namespace, field.name, field.field, field.version) == (
        "s3://lake",
        "marts/x",
        "total",
        "v1",
    )


@pytest.mark.parametrize("value", ["table:a:b", "dataset:nocolon", "datasetField:a:b:", "job"])
def test_parse_node_id_refuses_what_is_not_a_node_id(value):
    with pytest.raises(ValidationProblem) as refused:
        nodes.parse_node_id(value)
    assert refused.value.errors[0].field == "nodeId"
