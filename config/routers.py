"""Database routing: the watchdog's tables live in their own database."""

WATCHDOG_ALIAS = "watchdog"


class WatchdogRouter:
    """Send the ``watchdog`` app to the ``watchdog`` alias and everything else to ``default``.

    The watchdog must keep paging while the catalog's database is down, so it never
    shares one (DESIGN.md principle 5).
    """

    def db_for_read(self, model, **hints):
        return WATCHDOG_ALIAS if model._meta.app_label == "watchdog" else None

    db_for_write = db_for_read

    def allow_relation(self, obj1, obj2, **hints):
        if (obj1._meta.app_label == "watchdog") != (obj2._meta.app_label == "watchdog"):
            return False
        return None

    def allow_migrate(self, db, app_label, model_name=None, **hints):
        if db == WATCHDOG_ALIAS:
            return app_label == "watchdog"
        return app_label != "watchdog"
