"""Where payloads are kept. For now only :mod:`freight.storage.files`, the file I/O behind
:meth:`freight.Freight.dump` and :meth:`freight.Freight.load`; nothing here is public API yet."""
