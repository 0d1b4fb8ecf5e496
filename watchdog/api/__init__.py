"""The watchdog's small REST API (``/api/v1/...`` on the watchdog's own server): monitors,
channels and incidents (``views``), a managing system's monitors and pings (``external``)
and ping keys (``ping_keys``), behind ``Authorization: Bearer wd_...`` tokens kept in the
watchdog's own database."""
