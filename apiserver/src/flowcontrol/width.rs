//! Request width: how many seats a request occupies (upstream `request/width.go` and
//! `list_work_estimator.go`, object-count estimate).
//!
//! A LIST served from the watch cache processes every stored object of its resource: it takes
//! `ceil(objects / 100)` seats (100 objects per seat, upstream's `ObjectsPerSeat`), at least 1,
//! at most the level's maximum; a LIST of one name (`metadata.name` field selector) takes 1. A
//! WATCH takes 1 seat, or a LIST's width when it asks for its initial events
//! (`sendInitialEvents=true`). Every other request takes 1 seat. (Upstream adds extra latency to
//! mutating requests for the watch events they cause; this server does not: its watch fan-out
//! happens off the request path.)

use super::request::RequestInfo;

/// Objects one seat processes (upstream `DefaultWorkEstimatorConfig.ObjectsPerSeat`).
pub const OBJECTS_PER_SEAT: u64 = 100;

/// The seats of a request; `stored` counts the objects of its resource (called only for a
/// LIST or an initial-events WATCH), `max_seats` is its level's maximum width.
pub fn seats(
    info: &RequestInfo,
    send_initial_events: bool,
    stored: impl FnOnce() -> u64,
    max_seats: u32,
) -> u32 {
    let listing = match info.verb.as_str() {
        "list" => true,
        "watch" => send_initial_events,
        _ => false,
    };
    if !listing || !info.name.is_empty() {
        return 1;
    }
    let objects = stored();
    let seats = objects.div_ceil(OBJECTS_PER_SEAT).min(u64::from(u32::MAX)) as u32;
    seats.clamp(1, max_seats.max(1))
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::Method;

    fn info(m: Method, path: &str, q: Option<&str>) -> RequestInfo {
        RequestInfo::parse(&m, path, q)
    }

    #[test]
    fn lists_are_as_wide_as_their_objects_within_the_level_maximum() {
        let list = info(Method::GET, "/api/v1/pods", None);
        assert_eq!(seats(&list, false, || 0, 10), 1);
        assert_eq!(seats(&list, false, || 100, 10), 1);
        assert_eq!(seats(&list, false, || 101, 10), 2);
        assert_eq!(seats(&list, false, || 750, 10), 8);
        assert_eq!(seats(&list, false, || 10_000, 10), 10);
        let one = info(
            Method::GET,
            "/api/v1/nodes",
            Some("fieldSelector=metadata.name=n1"),
        );
        assert_eq!(seats(&one, false, || 10_000, 10), 1);
    }

    #[test]
    fn watches_and_others_take_one_seat() {
        let never = || -> u64 { panic!("not counted") };
        let watch = info(Method::GET, "/api/v1/pods", Some("watch=true"));
        assert_eq!(seats(&watch, false, never, 10), 1);
        assert_eq!(seats(&watch, true, || 500, 10), 5);
        let create = info(Method::POST, "/api/v1/namespaces/a/pods", None);
        assert_eq!(seats(&create, false, never, 10), 1);
        let get = info(Method::GET, "/api/v1/namespaces/a/pods/p", None);
        assert_eq!(seats(&get, false, never, 10), 1);
    }
}
