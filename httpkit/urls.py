"""The shared assets' URLs (``httpkit.assets``), mounted at the site root by the catalog's
URLconf and by the watchdog's own: browsers ask for ``/favicon.ico`` by themselves."""

from django.urls import path

from . import assets

urlpatterns = [
    path("assets/<str:name>", assets.serve, name="asset"),
    path("favicon.svg", assets.serve, {"name": "favicon.svg"}, name="favicon-svg"),
    path("favicon.ico", assets.serve, {"name": "favicon.ico"}, name="favicon-ico"),
]
