//! HTTP plumbing shared by the handlers: path parsing, query parsing, the resolved request
//! ([`request`]), content negotiation, rendering ([`render`]), limits, and body decoding.

pub mod body;
pub mod httplog;
pub mod limits;
pub mod loopback;
pub mod negotiate;
pub mod path;
pub mod preread;
pub mod query;
pub mod render;
pub mod request;
pub mod request_info;
pub mod tls;
