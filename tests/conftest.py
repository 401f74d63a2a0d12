pytest_plugins = ["tests.kafka_fixtures"]
