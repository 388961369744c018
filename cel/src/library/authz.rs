//! Kubernetes' authz library (`library/authz.go`): the `authorizer` variable of admission
//! expressions asks the apiserver's authorizer about the requesting user or a service account.
//!
//! ```text
//! authorizer.group('apps').resource('deployments').namespace('ns').name('n').subresource('scale').check('update').allowed()
//! authorizer.path('/healthz').check('get').reason()
//! authorizer.serviceAccount('ns', 'sa').group('').resource('pods').check('list').errored()
//! authorizer.requestResource.check('delete').error()
//! ```
//!
//! The values are upstream's receiver-only objects (`kubernetes.authorization.Authorizer`,
//! `PathCheck`, `GroupCheck`, `ResourceCheck`, `Decision`); the decision itself comes from an
//! [`Authorize`] the embedding server supplies with the variable ([`AuthorizerVal::new`]), so
//! this crate knows nothing of RBAC. A `check` costs 350,000 (`authzCheckCost` of upstream's
//! `library/cost.go`: at most two checks fit in one expression's limit); building a check costs
//! nothing extra.
//!
//! The `AuthzSelectors` library (`AuthorizeWithSelectors`, beta and on in 1.33) narrows a
//! resource check to a field or label selector:
//!
//! ```text
//! authorizer.group('').resource('pods').fieldSelector('spec.nodeName=n1').labelSelector('app=web').check('list').allowed()
//! ```
//!
//! The selectors are carried as written in the [`Question`] (the embedding server parses them
//! into its authorizer's attributes, as upstream's `Authorize` does: requirements, or the parse
//! error in their place; a selector that does not parse adds no requirement and never fails the
//! expression). An empty selector is none. RBAC ignores selectors, as upstream's does.

use super::library_type;
use crate::env::{boolean, charge, fail, owned, str_arg, typed, CelResult};
use cel::common::traits::Indexer;
use cel::common::types::{CelString, STRING_TYPE};
use cel::common::value::{CowVal, Val};
use cel::{DeclarationError, Env};
use std::fmt;
use std::sync::Arc;

/// `authzCheckCost` (`apiserver/pkg/cel/library/cost.go`).
pub const CHECK_COST: u64 = 350_000;

/// Whose permissions a check asks about.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Principal {
    /// The user who sent the request being admitted.
    Requester,
    /// `authorizer.serviceAccount(namespace, name)`.
    ServiceAccount { namespace: String, name: String },
}

/// An authorization question (`authorizer.AttributesRecord`).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Question {
    /// A resource request (`APIVersion: "*"`).
    Resource {
        group: String,
        resource: String,
        subresource: String,
        namespace: String,
        name: String,
        verb: String,
        /// `fieldSelector(…)` as written (`""`: none).
        field_selector: String,
        /// `labelSelector(…)` as written (`""`: none).
        label_selector: String,
    },
    /// A non-resource request: an HTTP verb on a path.
    Path { path: String, verb: String },
}

/// The authorizer's answer.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Answer {
    /// `DecisionAllow` (deny and no opinion are both not allowed).
    pub allowed: bool,
    pub reason: String,
    /// The authorizer failed.
    pub error: Option<String>,
}

/// The server's authorizer, as expressions reach it.
pub trait Authorize: Send + Sync {
    fn authorize(&self, principal: &Principal, question: &Question) -> Answer;
}

/// `authorizerVal`. The request's own resource, where bound, is its field `requestResource`
/// (upstream declares `authorizer.requestResource` as a variable of its own; a field of the
/// `authorizer` value reads the same in an expression).
#[derive(Clone)]
pub struct AuthorizerVal {
    backend: Arc<dyn Authorize>,
    principal: Principal,
    request: Option<Arc<RequestResource>>,
}

impl fmt::Debug for AuthorizerVal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Authorizer")
            .field("principal", &self.principal)
            .finish_non_exhaustive()
    }
}

impl PartialEq for AuthorizerVal {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.backend, &other.backend)
            && self.principal == other.principal
            && self.request == other.request
    }
}

pub static AUTHORIZER_TYPE: cel::common::types::Type =
    cel::common::types::Type::new_unspecified_type("kubernetes.authorization.Authorizer");

impl Val for AuthorizerVal {
    fn get_type(&self) -> &cel::common::types::Type {
        &AUTHORIZER_TYPE
    }
    fn cel_type() -> &'static cel::common::types::Type {
        &AUTHORIZER_TYPE
    }
    fn equals(&self, other: &dyn Val) -> bool {
        other.downcast_ref::<Self>().is_some_and(|o| o == self)
    }
    fn as_indexer<'b, 'v>(&'b self) -> Option<&'b (dyn Indexer + 'v)>
    where
        Self: 'v,
    {
        Some(self)
    }
    fn clone_as_boxed<'v>(&self) -> Box<dyn Val + 'v>
    where
        Self: 'v,
    {
        Box::new(self.clone())
    }
    fn as_any(&self) -> Option<&dyn std::any::Any> {
        Some(self)
    }
}

impl cel::common::value::StaticVal for AuthorizerVal {}

impl Indexer for AuthorizerVal {
    fn get<'b, 'v>(&'b self, idx: &dyn Val) -> Result<CowVal<'b, 'v>, cel::ExecutionError>
    where
        Self: 'v,
    {
        let field = idx
            .downcast_ref::<CelString>()
            .map(|s| s.inner().to_owned());
        match (&self.request, field.as_deref()) {
            (Some(r), Some("requestResource")) => Ok(CowVal::owned(self.request_resource(r))),
            (_, Some(other)) => Err(cel::ExecutionError::NoSuchKey(Arc::new(other.to_owned()))),
            (_, None) => Err(cel::ExecutionError::UnexpectedType {
                got: idx.get_type().name().to_owned(),
                want: "string".to_owned(),
            }),
        }
    }

    fn steal<'v>(self: Box<Self>, idx: &dyn Val) -> Result<Box<dyn Val + 'v>, cel::ExecutionError>
    where
        Self: 'v,
    {
        self.get(idx).map(CowVal::into_owned)
    }
}

/// `pathCheckVal`.
#[derive(Debug, Clone, PartialEq)]
pub struct PathCheck {
    authorizer: AuthorizerVal,
    path: String,
}

/// `groupCheckVal`.
#[derive(Debug, Clone, PartialEq)]
pub struct GroupCheck {
    authorizer: AuthorizerVal,
    group: String,
}

/// `resourceCheckVal`.
#[derive(Debug, Clone, PartialEq)]
pub struct ResourceCheck {
    authorizer: AuthorizerVal,
    group: String,
    resource: String,
    subresource: String,
    namespace: String,
    name: String,
    field_selector: String,
    label_selector: String,
}

/// `decisionVal`.
#[derive(Debug, Clone, PartialEq)]
pub struct Decision(Answer);

library_type!(
    PathCheck,
    PATH_CHECK_TYPE,
    "kubernetes.authorization.PathCheck"
);
library_type!(
    GroupCheck,
    GROUP_CHECK_TYPE,
    "kubernetes.authorization.GroupCheck"
);
library_type!(
    ResourceCheck,
    RESOURCE_CHECK_TYPE,
    "kubernetes.authorization.ResourceCheck"
);
library_type!(Decision, DECISION_TYPE, "kubernetes.authorization.Decision");

/// The resource of the request being admitted (`authorizer.requestResource`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RequestResource {
    pub group: String,
    pub resource: String,
    pub subresource: String,
    pub namespace: String,
    pub name: String,
}

impl AuthorizerVal {
    /// `NewAuthorizerVal`: checks as the requesting user, decided by `backend`, with the
    /// request's own resource as `requestResource` (`NewResourceAuthorizerVal`).
    pub fn new(backend: Arc<dyn Authorize>, request: Option<RequestResource>) -> AuthorizerVal {
        AuthorizerVal {
            backend,
            principal: Principal::Requester,
            request: request.map(Arc::new),
        }
    }

    /// The check of the request's own resource.
    fn request_resource(&self, r: &RequestResource) -> ResourceCheck {
        ResourceCheck {
            authorizer: AuthorizerVal {
                request: None,
                ..self.clone()
            },
            group: r.group.clone(),
            resource: r.resource.clone(),
            subresource: r.subresource.clone(),
            namespace: r.namespace.clone(),
            name: r.name.clone(),
            field_selector: String::new(),
            label_selector: String::new(),
        }
    }
}

pub fn register(env: &mut Env) -> Result<(), DeclarationError> {
    let s = || STRING_TYPE.to_owned();
    let (a, p, g, r, d) = (
        || AUTHORIZER_TYPE.to_owned(),
        || PATH_CHECK_TYPE.to_owned(),
        || GROUP_CHECK_TYPE.to_owned(),
        || RESOURCE_CHECK_TYPE.to_owned(),
        || DECISION_TYPE.to_owned(),
    );
    env.add_member_overload("path", "authorizer_path", a(), vec![s()], path)?;
    env.add_member_overload("group", "authorizer_group", a(), vec![s()], group)?;
    env.add_member_overload(
        "serviceAccount",
        "authorizer_serviceaccount",
        a(),
        vec![s(), s()],
        service_account,
    )?;
    env.add_member_overload("resource", "groupcheck_resource", g(), vec![s()], resource)?;
    let setters: [(&str, &str, cel::common::functions::Function); 5] = [
        ("subresource", "resourcecheck_subresource", subresource),
        ("namespace", "resourcecheck_namespace", namespace),
        ("name", "resourcecheck_name", name),
        // The `AuthzSelectors` library's overload ids.
        ("fieldSelector", "authorizer_fieldselector", field_selector),
        ("labelSelector", "authorizer_labelselector", label_selector),
    ];
    for (function, id, op) in setters {
        env.add_member_overload(function, id, r(), vec![s()], op)?;
    }
    env.add_member_overload("check", "pathcheck_check", p(), vec![s()], check_path)?;
    env.add_member_overload(
        "check",
        "resourcecheck_check",
        r(),
        vec![s()],
        check_resource,
    )?;
    env.add_member_overload("allowed", "decision_allowed", d(), vec![], allowed)?;
    env.add_member_overload("reason", "decision_reason", d(), vec![], reason)?;
    env.add_member_overload("errored", "decision_errored", d(), vec![], errored)?;
    env.add_member_overload("error", "decision_error", d(), vec![], error)?;
    Ok(())
}

fn path<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> CelResult<'b, 'v> {
    let authorizer = typed::<AuthorizerVal>(&args, 0)?.clone();
    let path = str_arg(&args, 1)?;
    if path.trim().is_empty() {
        return fail("path", "path must not be empty");
    }
    owned(PathCheck {
        authorizer,
        path: path.to_owned(),
    })
}

fn group<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> CelResult<'b, 'v> {
    owned(GroupCheck {
        authorizer: typed::<AuthorizerVal>(&args, 0)?.clone(),
        group: str_arg(&args, 1)?.to_owned(),
    })
}

fn service_account<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> CelResult<'b, 'v> {
    let authorizer = typed::<AuthorizerVal>(&args, 0)?;
    let (namespace, name) = (str_arg(&args, 1)?, str_arg(&args, 2)?);
    // `ValidateServiceAccountName` (a DNS subdomain), `ValidateNamespaceName` (a DNS label).
    if !api::validation::name_is_dns1123_subdomain(name, false).is_empty() {
        return fail("serviceAccount", "Invalid service account name");
    }
    if !api::validation::name_is_dns1123_label(namespace, false).is_empty() {
        return fail("serviceAccount", "Invalid service account namespace");
    }
    owned(AuthorizerVal {
        backend: authorizer.backend.clone(),
        principal: Principal::ServiceAccount {
            namespace: namespace.to_owned(),
            name: name.to_owned(),
        },
        request: None,
    })
}

fn resource<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> CelResult<'b, 'v> {
    let g = typed::<GroupCheck>(&args, 0)?;
    let resource = str_arg(&args, 1)?;
    if resource.trim().is_empty() {
        return fail("resource", "resource must not be empty");
    }
    owned(ResourceCheck {
        authorizer: g.authorizer.clone(),
        group: g.group.clone(),
        resource: resource.to_owned(),
        subresource: String::new(),
        namespace: String::new(),
        name: String::new(),
        field_selector: String::new(),
        label_selector: String::new(),
    })
}

/// A copy of the check with one field set by `f`.
fn set<'b, 'v>(
    args: Vec<CowVal<'b, 'v>>,
    f: impl FnOnce(&mut ResourceCheck, String),
) -> CelResult<'b, 'v> {
    let mut r = typed::<ResourceCheck>(&args, 0)?.clone();
    f(&mut r, str_arg(&args, 1)?.to_owned());
    owned(r)
}

fn subresource<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> CelResult<'b, 'v> {
    set(args, |r, v| r.subresource = v)
}

fn namespace<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> CelResult<'b, 'v> {
    set(args, |r, v| r.namespace = v)
}

fn name<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> CelResult<'b, 'v> {
    set(args, |r, v| r.name = v)
}

fn field_selector<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> CelResult<'b, 'v> {
    set(args, |r, v| r.field_selector = v)
}

fn label_selector<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> CelResult<'b, 'v> {
    set(args, |r, v| r.label_selector = v)
}

fn check_path<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> CelResult<'b, 'v> {
    charge(CHECK_COST)?;
    let p = typed::<PathCheck>(&args, 0)?;
    let question = Question::Path {
        path: p.path.clone(),
        verb: str_arg(&args, 1)?.to_owned(),
    };
    let a = &p.authorizer;
    owned(Decision(a.backend.authorize(&a.principal, &question)))
}

fn check_resource<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> CelResult<'b, 'v> {
    charge(CHECK_COST)?;
    let r = typed::<ResourceCheck>(&args, 0)?;
    let question = Question::Resource {
        group: r.group.clone(),
        resource: r.resource.clone(),
        subresource: r.subresource.clone(),
        namespace: r.namespace.clone(),
        name: r.name.clone(),
        verb: str_arg(&args, 1)?.to_owned(),
        field_selector: r.field_selector.clone(),
        label_selector: r.label_selector.clone(),
    };
    let a = &r.authorizer;
    owned(Decision(a.backend.authorize(&a.principal, &question)))
}

fn decision<'a>(args: &'a [CowVal<'_, '_>]) -> Result<&'a Answer, cel::ExecutionError> {
    Ok(&typed::<Decision>(args, 0)?.0)
}

fn allowed<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> CelResult<'b, 'v> {
    boolean(decision(&args)?.allowed)
}

fn reason<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> CelResult<'b, 'v> {
    owned(CelString::from(decision(&args)?.reason.clone()))
}

fn errored<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> CelResult<'b, 'v> {
    boolean(decision(&args)?.error.is_some())
}

fn error<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> CelResult<'b, 'v> {
    owned(CelString::from(
        decision(&args)?.error.clone().unwrap_or_default(),
    ))
}

#[cfg(test)]
#[path = "authz_tests.rs"]
mod tests;
