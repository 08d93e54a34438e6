"""Scale-out over Kafka: the wire format (``codec``), the publisher behind
``watch --publish``, the worker's plain core (``fleet``) and its faust app
(``app``, the only module here that imports faust)."""
