-- The read model's tables (ClickHouse; chdb in dev, a ClickHouse server in production).
-- `{db}` is replaced by the database name. Every statement is idempotent.
--
-- Replay safety: every row records the source position (topic, partition, offset, index in
-- the event) it was projected from. Latest-state tables are ReplacingMergeTree(version)
-- keyed per entity *facet*: each fact type owns one facet row per entity and replaces it
-- whole, so partial updates from different topics never overwrite each other, and `version`
-- (a UInt256 of four 64-bit lanes, see projector.version) orders the facts of one facet.
-- History tables are ReplacingMergeTree keyed by the source position: a replayed record
-- collapses onto the row it already wrote. Read with FINAL. Every history table has an
-- `at` (event time, ms) and is listed in readmodel/retention.py: the store gives each a TTL
-- on `at` from the PELOTON_HISTORY_TTL_DAYS setting when it creates the schema.

CREATE DATABASE IF NOT EXISTS {db};

-- facets: spec (JobSubmitted, then JobCreated, then each JobSpecChanged), submitted,
-- created, state, kill
CREATE TABLE IF NOT EXISTS {db}.jobs (
    job_id String,
    facet LowCardinality(String),
    version UInt256,
    at Int64,
    name String,
    owner String,
    description String,
    type LowCardinality(String),
    respool String,
    instance_count UInt32,
    priority Int32,
    preemptible Bool,
    labels Map(String, String),
    config_json String,
    state LowCardinality(String),
    previous_state LowCardinality(String),
    task_counts Map(String, UInt32),
    reasons Array(String),
    kill_instances Array(Int32),
    src_topic LowCardinality(String),
    src_partition UInt32,
    src_offset UInt64,
    src_index UInt32
) ENGINE = ReplacingMergeTree(version) ORDER BY (job_id, facet);

-- facets: state (TaskStateChanged), reason (admission / placement), status (agent report),
-- health (TaskHealthChanged)
CREATE TABLE IF NOT EXISTS {db}.tasks (
    job_id String,
    instance UInt32,
    facet LowCardinality(String),
    version UInt256,
    at Int64,
    run UInt32,
    state LowCardinality(String),
    previous_state LowCardinality(String),
    host Nullable(String),
    reason String,
    exit_code Nullable(Int32),
    failures UInt32,
    sandbox String,
    config_version UInt32 DEFAULT 1,
    src_topic LowCardinality(String),
    src_partition UInt32,
    src_offset UInt64,
    src_index UInt32
) ENGINE = ReplacingMergeTree(version) ORDER BY (job_id, instance, facet);

-- the job config version a run runs (TaskStateChanged.v3); stores made before it gain it
ALTER TABLE {db}.tasks ADD COLUMN IF NOT EXISTS config_version UInt32 DEFAULT 1;

CREATE TABLE IF NOT EXISTS {db}.task_events (
    job_id String,
    instance UInt32,
    at Int64,
    time DateTime64(3) MATERIALIZED fromUnixTimestamp64Milli(at),
    run UInt32,
    state LowCardinality(String),
    previous_state LowCardinality(String),
    host Nullable(String),
    reason String,
    exit_code Nullable(Int32),
    failures UInt32,
    config_version UInt32 DEFAULT 1,
    src_topic LowCardinality(String),
    src_partition UInt32,
    src_offset UInt64,
    src_index UInt32
) ENGINE = ReplacingMergeTree
ORDER BY (job_id, instance, src_topic, src_partition, src_offset, src_index, at);

ALTER TABLE {db}.task_events ADD COLUMN IF NOT EXISTS config_version UInt32 DEFAULT 1;

-- every job state fact (JobSubmitted's SUBMITTED at tier 0; JobCreated's PENDING,
-- JobRejected, JobStateChanged at tier 1), for the job's state as of a past instant
-- (readmodel/history.py): the newest by (tier, offset) among those at or before it
CREATE TABLE IF NOT EXISTS {db}.job_events (
    job_id String,
    at Int64,
    time DateTime64(3) MATERIALIZED fromUnixTimestamp64Milli(at),
    tier UInt8,
    state LowCardinality(String),
    previous_state LowCardinality(String),
    task_counts Map(String, UInt32),
    reasons Array(String),
    src_topic LowCardinality(String),
    src_partition UInt32,
    src_offset UInt64,
    src_index UInt32
) ENGINE = ReplacingMergeTree
ORDER BY (job_id, tier, src_topic, src_partition, src_offset, src_index);

-- a job's rolling updates, one row per (job_id, update_id, facet): `state` (the job
-- manager's UpdateStateChanged, or REJECTED from JobUpdateRejected), `request` (the user's
-- JobUpdateRequested: REQUESTED until answered), `first` (the earliest fact seen: its
-- `at` is the update's created_at) and `command` (the newest refused command)
CREATE TABLE IF NOT EXISTS {db}.updates (
    job_id String,
    update_id String,
    facet LowCardinality(String),
    version UInt256,
    at Int64,
    state LowCardinality(String),
    previous_state LowCardinality(String),
    reason String,
    command LowCardinality(String),
    from_version Int32,
    to_version Int32,
    from_instance_count UInt32,
    to_instance_count UInt32,
    done Array(Int32),
    failed Array(Int32),
    in_flight Array(Int32),
    resume_to LowCardinality(String),
    settings_json String,
    requested_by String,
    src_topic LowCardinality(String),
    src_partition UInt32,
    src_offset UInt64,
    src_index UInt32
) ENGINE = ReplacingMergeTree(version) ORDER BY (job_id, update_id, facet);

-- facets: registration, heartbeat, lost, offer
CREATE TABLE IF NOT EXISTS {db}.hosts (
    host String,
    facet LowCardinality(String),
    version UInt256,
    at Int64,
    incarnation String,
    capacity Map(LowCardinality(String), Float64),
    free Map(LowCardinality(String), Float64),
    labels Map(String, String),
    log_url String,
    port_range_begin Int32,
    port_range_end Int32,
    simulated Bool,
    available Bool,
    generation Int64,
    running UInt32,
    reason String,
    src_topic LowCardinality(String),
    src_partition UInt32,
    src_offset UInt64,
    src_index UInt32
) ENGINE = ReplacingMergeTree(version) ORDER BY (host, facet);

-- one row per host: its maintenance state (UP, DRAINING, DRAINED, DOWN) and presence as
-- the host manager last announced them (HostStateChanged, topic host-events)
CREATE TABLE IF NOT EXISTS {db}.host_states (
    host String,
    version UInt256,
    at Int64,
    state LowCardinality(String),
    previous_state LowCardinality(String),
    present Bool,
    labels Map(String, String),
    reason String,
    deadline Nullable(Int64),
    src_topic LowCardinality(String),
    src_partition UInt32,
    src_offset UInt64,
    src_index UInt32
) ENGINE = ReplacingMergeTree(version) ORDER BY host;

-- every maintenance fact about a host: state changes and refused requests (REJECTED)
CREATE TABLE IF NOT EXISTS {db}.host_events (
    host String,
    at Int64,
    kind LowCardinality(String),
    state LowCardinality(String),
    previous_state LowCardinality(String),
    present Bool,
    command LowCardinality(String),
    reason String,
    deadline Nullable(Int64),
    src_topic LowCardinality(String),
    src_partition UInt32,
    src_offset UInt64,
    src_index UInt32
) ENGINE = ReplacingMergeTree
ORDER BY (host, src_topic, src_partition, src_offset, src_index);

CREATE TABLE IF NOT EXISTS {db}.pools (
    pool String,
    version UInt256,
    at Int64,
    cycle Int64,
    parent Nullable(String),
    capacity Map(LowCardinality(String), Float64),
    reservation Map(LowCardinality(String), Float64),
    limit Map(LowCardinality(String), Float64),
    entitlement Map(LowCardinality(String), Float64),
    slack_entitlement Map(LowCardinality(String), Float64),
    nonslack_entitlement Map(LowCardinality(String), Float64),
    allocation Map(LowCardinality(String), Float64),
    demand Map(LowCardinality(String), Float64),
    src_topic LowCardinality(String),
    src_partition UInt32,
    src_offset UInt64,
    src_index UInt32
) ENGINE = ReplacingMergeTree(version) ORDER BY pool;

-- one row per pool per entitlement cycle, for Grafana (time series on `time`)
CREATE TABLE IF NOT EXISTS {db}.entitlement_history (
    pool String,
    at Int64,
    time DateTime64(3) MATERIALIZED fromUnixTimestamp64Milli(at),
    cycle Int64,
    parent Nullable(String),
    capacity Map(LowCardinality(String), Float64),
    reservation Map(LowCardinality(String), Float64),
    limit Map(LowCardinality(String), Float64),
    entitlement Map(LowCardinality(String), Float64),
    slack_entitlement Map(LowCardinality(String), Float64),
    nonslack_entitlement Map(LowCardinality(String), Float64),
    allocation Map(LowCardinality(String), Float64),
    demand Map(LowCardinality(String), Float64),
    src_topic LowCardinality(String),
    src_partition UInt32,
    src_offset UInt64,
    src_index UInt32
) ENGINE = ReplacingMergeTree
ORDER BY (pool, at, src_topic, src_partition, src_offset, src_index);

CREATE TABLE IF NOT EXISTS {db}.dead_letters (
    at Int64,
    time DateTime64(3) MATERIALIZED fromUnixTimestamp64Milli(at),
    service LowCardinality(String),
    source_topic LowCardinality(String),
    partition UInt32,
    offset UInt64,
    reason String,
    key Nullable(String),
    value_size UInt64,
    value_b64 String,
    src_topic LowCardinality(String),
    src_partition UInt32,
    src_offset UInt64,
    src_index UInt32
) ENGINE = ReplacingMergeTree
ORDER BY (src_topic, src_partition, src_offset, src_index, at);

-- one row per pool path: its config as the resource manager last decided it (deleted: the
-- path no longer exists). The implicit /default pool has a row only once it was updated.
CREATE TABLE IF NOT EXISTS {db}.pool_configs (
    pool String,
    version UInt256,
    at Int64,
    deleted Bool,
    parent Nullable(String),
    config_json String,
    request_id String,
    src_topic LowCardinality(String),
    src_partition UInt32,
    src_offset UInt64,
    src_index UInt32
) ENGINE = ReplacingMergeTree(version) ORDER BY pool;

-- one row per pool request: REQUESTED, then ACCEPTED or REJECTED (with the reasons)
CREATE TABLE IF NOT EXISTS {db}.pool_requests (
    request_id String,
    version UInt256,
    at Int64,
    path String,
    operation LowCardinality(String),
    state LowCardinality(String),
    reasons Array(String),
    src_topic LowCardinality(String),
    src_partition UInt32,
    src_offset UInt64,
    src_index UInt32
) ENGINE = ReplacingMergeTree(version) ORDER BY request_id;

-- every run the resource manager preempted, with the reason code and detail
CREATE TABLE IF NOT EXISTS {db}.preemptions (
    job_id String,
    instance UInt32,
    run UInt32,
    at Int64,
    time DateTime64(3) MATERIALIZED fromUnixTimestamp64Milli(at),
    pool String,
    reason LowCardinality(String),
    detail String,
    src_topic LowCardinality(String),
    src_partition UInt32,
    src_offset UInt64,
    src_index UInt32
) ENGINE = ReplacingMergeTree
ORDER BY (job_id, instance, run, src_topic, src_partition, src_offset, src_index);

-- who a preemption made room for (HIGHER_PRIORITY_IN_POOL: the gang or task named in the
-- detail; '' for POOL_OVER_ENTITLEMENT, which takes back room from a pool, for no one)
ALTER TABLE {db}.preemptions ADD COLUMN IF NOT EXISTS preemptor String AFTER detail;

-- every offer the host manager published for a host, for utilization over time (the
-- `hosts` table keeps only the newest): allocated = capacity - free
CREATE TABLE IF NOT EXISTS {db}.host_offers (
    host String,
    at Int64,
    time DateTime64(3) MATERIALIZED fromUnixTimestamp64Milli(at),
    incarnation String,
    capacity Map(LowCardinality(String), Float64),
    free Map(LowCardinality(String), Float64),
    available Bool,
    generation Int64,
    src_topic LowCardinality(String),
    src_partition UInt32,
    src_offset UInt64,
    src_index UInt32
) ENGINE = ReplacingMergeTree
ORDER BY (host, at, src_topic, src_partition, src_offset, src_index);

-- every note why a run waits: `stage` admission (AdmissionDeferred, with its pool) or
-- placement (PlacementFailed: `pool` '', the job's respool is the pool); `reason` is the
-- resource manager's or placement engine's own text (the `tasks` reason facet keeps the
-- newest note per task, prefixed for display)
CREATE TABLE IF NOT EXISTS {db}.task_waits (
    job_id String,
    instance UInt32,
    run UInt32,
    at Int64,
    time DateTime64(3) MATERIALIZED fromUnixTimestamp64Milli(at),
    pool String,
    stage LowCardinality(String),
    reason String,
    src_topic LowCardinality(String),
    src_partition UInt32,
    src_offset UInt64,
    src_index UInt32
) ENGINE = ReplacingMergeTree
ORDER BY (job_id, instance, run, src_topic, src_partition, src_offset, src_index);

-- one row: the store's epoch, drawn when the tables were first created (the materializer's
-- consumer group includes it, so a fresh store reads every topic from the start)
CREATE TABLE IF NOT EXISTS {db}.meta (
    name String,
    value String
) ENGINE = ReplacingMergeTree ORDER BY name;
