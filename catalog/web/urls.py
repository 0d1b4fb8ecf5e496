"""The catalog's web pages, mounted at the site root (``config.urls``)."""

from django.contrib.auth import views as auth_views
from django.urls import path

from httpkit.methods import post_only

from . import endpoints, views

app_name = "web"

urlpatterns = [
    path("", views.dataset_list_page, name="datasets"),
    path("datasets/<int:dataset_id>/", views.dataset_page, name="dataset"),
    path("datasets/<int:dataset_id>/edit", views.dataset_edit, name="dataset-edit"),
    path("datasets/<int:dataset_id>/subscribe", views.dataset_subscribe, name="dataset-subscribe"),
    path(
        "datasets/<int:dataset_id>/notices/<int:notice_id>/acknowledge",
        views.change_notice_acknowledge,
        name="notice-acknowledge",
    ),
    path("teams/<slug:slug>/", views.team_page, name="team"),
    path(
        "teams/<slug:slug>/deliveries/<int:delivery_id>/replay",
        views.delivery_replay,
        name="delivery-replay",
    ),
    path(
        "teams/<slug:slug>/endpoints/<int:endpoint_id>/replay",
        views.endpoint_replay,
        name="endpoint-replay",
    ),
    path(
        "teams/<slug:slug>/endpoints/<int:endpoint_id>/enable",
        endpoints.endpoint_enable,
        name="endpoint-enable",
    ),
    path(
        "teams/<slug:slug>/endpoints/<int:endpoint_id>/recover",
        endpoints.endpoint_recover,
        name="endpoint-recover",
    ),
    path(
        "teams/<slug:slug>/endpoints/<int:endpoint_id>/attempts",
        endpoints.endpoint_attempts,
        name="endpoint-attempts",
    ),
    path("teams/<slug:slug>/keys", views.api_key_create, name="key-create"),
    path("teams/<slug:slug>/keys/<str:public_id>/revoke", views.api_key_revoke, name="key-revoke"),
    path("governance/", views.governance_page, name="governance"),
]

# Django's own login and logout views (namespaced ``login``/``logout`` at the root).
auth_urlpatterns = [
    path("accounts/login/", auth_views.LoginView.as_view(), name="login"),
    path(
        "accounts/logout/",
        post_only(what="Signing out", back=lambda: ("/", "the catalog"), layout="base.html")(
            auth_views.LogoutView.as_view()
        ),
        name="logout",
    ),
]
