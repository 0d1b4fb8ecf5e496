"""factory-boy factories for the catalog's models."""

from __future__ import annotations

import factory
from factory.django import DjangoModelFactory

from catalog.models import Dataset, Endpoint, Subscription, Team


class TeamFactory(DjangoModelFactory[Team]):
    class Meta:
        model = Team
        django_get_or_create = ("slug",)

    slug = factory.Sequence(lambda n: f"team-{n}")
    name = factory.LazyAttribute(lambda o: o.slug.replace("-", " ").title())
    contact_email = factory.LazyAttribute(lambda o: f"{o.slug}@example.com")


class DatasetFactory(DjangoModelFactory[Dataset]):
    class Meta:
        model = Dataset

    namespace = "s3://lake"
    name = factory.Sequence(lambda n: f"raw/table_{n}")
    owner = factory.SubFactory(TeamFactory)
    partitioning = Dataset.Partitioning.DAILY


class EndpointFactory(DjangoModelFactory[Endpoint]):
    class Meta:
        model = Endpoint

    team = factory.SubFactory(TeamFactory)
    url = factory.Sequence(lambda n: f"https://hooks.example.com/{n}")


class SubscriptionFactory(DjangoModelFactory[Subscription]):
    class Meta:
        model = Subscription

    team = factory.SubFactory(TeamFactory)
    dataset = factory.SubFactory(DatasetFactory)
    endpoint = factory.SubFactory(EndpointFactory, team=factory.SelfAttribute("..team"))
