//! What classification reads of a request (upstream's `RequestDigest`): its
//! [`RequestInfo`](crate::http::request_info) and the user.

pub use crate::http::request_info::RequestInfo;

use crate::authn::identity::UserInfo;

/// What a request is classified by.
#[derive(Debug, Clone)]
pub struct RequestDigest {
    pub info: RequestInfo,
    pub user: UserInfo,
}
