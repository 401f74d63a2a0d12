"""The single exception type of localkafka."""


class LocalBrokerError(RuntimeError):
    """The local Kafka broker could not be fetched, formatted, started, reached or stopped."""
