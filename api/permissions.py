"""Scope checks: each view names the API key scope it needs in ``required_scope``."""

from rest_framework import exceptions, permissions


class HasScope(permissions.BasePermission):
    """Allow authenticated keys holding the view's ``required_scope`` (``None``: any key; a
    tuple: any one of its scopes)."""

    def has_permission(self, request, view) -> bool:
        if request.auth is None:
            raise exceptions.NotAuthenticated("send 'Authorization: Bearer <API key>'")
        scope = getattr(view, "required_scope", None)
        if isinstance(scope, dict):
            # HEAD runs the GET handler, so it needs GET's scope.
            scope = scope.get("GET" if request.method == "HEAD" else request.method)
        if isinstance(scope, tuple):
            if not any(request.auth.has_scope(s) for s in scope):
                names = " or ".join(f"'{s}'" for s in scope)
                raise exceptions.PermissionDenied(f"this API key lacks the {names} scope")
        elif scope is not None and not request.auth.has_scope(scope):
            raise exceptions.PermissionDenied(f"this API key lacks the '{scope}' scope")
        return True


class Public(permissions.BasePermission):
    """No authentication needed (health probes, schema)."""

    def has_permission(self, request, view) -> bool:
        return True


class MarquezRead(HasScope):
    """The Marquez-compatible read API: a key with the ``read`` or ``governance`` scope,
    or no key at all where ``TIDEMARK_MARQUEZ_API_PUBLIC`` allows it (a key that is sent
    is still checked: a bad one is a 401)."""

    def has_permission(self, request, view) -> bool:
        from django.conf import settings

        if request.auth is None and settings.TIDEMARK_MARQUEZ_API_PUBLIC:
            return True
        return super().has_permission(request, view)
