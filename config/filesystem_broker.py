"""kombu's filesystem transport (the embedded broker) with message files that appear whole.

kombu 5.7's filesystem ``_put`` creates a message file, then locks it and writes it, while
``_get`` moves and reads a file without taking that lock. A worker polling at the wrong
moment reads an empty file, cannot decode it and stops with "Unrecoverable error:
JSONDecodeError" (kombu issue #1551), and ``make run`` stops with it. Here each message is
written whole to a staging folder on the same filesystem and renamed into the queue
folder, so a reader only ever finds complete files (``os.replace`` is atomic within one
filesystem).

Selected with ``CELERY_BROKER_TRANSPORT`` next to ``CELERY_BROKER_URL="filesystem://"``;
the staging folder is the transport option ``staging_folder``.
"""

from __future__ import annotations

import os
import uuid
from time import monotonic

from kombu.exceptions import ChannelError
from kombu.transport import filesystem
from kombu.utils.encoding import str_to_bytes
from kombu.utils.json import dumps


class Channel(filesystem.Channel):
    """A filesystem channel whose ``_put`` stages then renames each message file."""

    def _put(self, queue, payload, **kwargs):
        # The name kombu's reader sorts and matches on: <ms>_<uuid>.<queue>.msg
        name = f"{round(monotonic() * 1000)}_{uuid.uuid4()}.{queue}.msg"
        staging = self.transport_options.get("staging_folder") or self.data_folder_out
        staged = os.path.join(staging, f"{name}.part")
        try:
            with open(staged, "wb") as file:
                file.write(str_to_bytes(dumps(payload)))
            os.replace(staged, os.path.join(self.data_folder_out, name))
        except OSError as exc:
            raise ChannelError(f"Cannot add file {name!r} to directory") from exc


class Transport(filesystem.Transport):
    """``filesystem://`` with ``Channel``'s whole-file writes."""

    Channel = Channel
