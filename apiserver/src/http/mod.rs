//! HTTP plumbing shared by the handlers: path parsing, query parsing, content negotiation,
//! limits, and body decoding.

pub mod body;
pub mod limits;
pub mod negotiate;
pub mod path;
pub mod query;
