-- Kafka → windows → Kafka in SQL, on the compose cluster: two jobs.
--
-- numbers_to_kafka writes a generated stream (key k of 8, value v, event
-- time ts) to the topic sql-events as JSON, exactly once, each message
-- keyed by k; per_second reads it back, sums each key's values per second
-- of event time, and writes every window's row to sql-windows exactly
-- once. The event time of a Kafka source is its messages' timestamp, which
-- the first job's sink sets to ts, and the watermark trails it in every
-- partition: a window's row comes once every partition's messages are past
-- its end by a second (so the last second's windows wait for more
-- messages, as a stream does). Submit it from the repository root with
--   docker-compose -p weir -f deploy/docker-compose.yml exec -T jobmanager-1 \
--     weir sql -f - < deploy/kafka-windows.sql
-- and read sql-windows with any Kafka client, isolation read_committed
-- (inside the compose network the broker is kafka:9092).

CREATE SOURCE numbers (k BIGINT, v BIGINT, ts TIMESTAMP)
WITH (connector = 'sequence', count = '20000', keys = '8', rate = '2000',
      event_time.step = '1ms', event_time.jitter = '20ms',
      event_time.start = '2026-01-01T00:00:00Z');

CREATE SINK numbers_to_kafka AS
SELECT k, v, ts FROM numbers
WITH (connector = 'kafka', topic = 'sql-events', properties.bootstrap.server = 'kafka:9092',
      delivery = 'exactly-once', transactional_id_prefix = 'sql-events',
      primary_key = 'k', format = 'json');

CREATE SOURCE events (k BIGINT, v BIGINT, ts TIMESTAMP,
                      WATERMARK FOR ts AS ts - INTERVAL '1' SECOND)
WITH (connector = 'kafka', topic = 'sql-events', properties.bootstrap.server = 'kafka:9092',
      scan.startup.mode = 'earliest', isolation = 'read-committed')
FORMAT PLAIN ENCODE JSON;

CREATE SINK per_second AS
SELECT k, window_start, window_end, count(*) AS n, sum(v) AS total
FROM TUMBLE(events, ts, INTERVAL '1' SECOND)
GROUP BY k, window_start, window_end
WITH (connector = 'kafka', topic = 'sql-windows', properties.bootstrap.server = 'kafka:9092',
      delivery = 'exactly-once', transactional_id_prefix = 'sql-windows',
      format = 'json');
