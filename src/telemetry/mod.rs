//! What the service tells its operators, one file each: logs (`logs`), the
//! audit trail (`audit`), the text line written plainly (`plain`), each request's span and id (`request`), Redis
//! outages noticed once (`outage`), and Prometheus metrics (`metrics`).

mod audit;
mod logs;
mod metrics;
mod outage;
mod plain;
mod request;

pub use self::audit::{audit, audit_more, audit_override, audit_yield};
pub use self::logs::init_logging;
pub use self::metrics::{
    init_metrics, record_acquisition, record_event_stream, record_expired,
    record_replica_wait_failure, record_request, record_tokens_loaded, record_tokens_reload,
    record_waiting, render_metrics,
};
pub use self::outage::{redis_answered, redis_failed, redis_timed_out, redis_unreachable};
pub use self::request::{
    acceptable_request_id, request_failed, request_span, trace_id_of, RequestContext, REQUEST_ID,
};
