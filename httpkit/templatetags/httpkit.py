"""``{% asset_url "tidemark.css" %}``: a shared asset's URL with its digest
(``httpkit.assets.asset_url``), for the layout both deployments' pages extend."""

from django import template

from .. import assets

register = template.Library()


@register.simple_tag
def asset_url(name: str) -> str:
    """The URL of the shared asset ``name``, cached by browsers until the file changes.

    Raises:
        KeyError: ``name`` is not one of the assets (a template error, found by any test
        rendering the page).
    """
    return assets.asset_url(name)
