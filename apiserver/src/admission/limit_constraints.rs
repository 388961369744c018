//! LimitRange constraints (`plugin/pkg/admission/limitranger/admission.go`): `min`, `max` and
//! `maxLimitRequestRatio` of `Container`, `Pod` and `PersistentVolumeClaim` items against the
//! requests and limits of containers, of a whole pod (`podRequests`/`podLimits`: the sum of the
//! containers and sidecars, at least the largest init container's need) or of a claim, with
//! upstream's messages.
//!
//! Values are compared as upstream does (`requestLimitEnforcedValues`): in milli-units when all
//! three fit, else in whole units, each rounded away from zero; quantities in messages are
//! canonical (`Quantity.String()`). Every failure of one LimitRange is reported, in item order and
//! then resource-name order (upstream iterates Go maps, so its order varies), joined as an
//! `utilerrors.Aggregate` (`[a, b]` for more than one).

use std::collections::BTreeMap;

use api::quantity::Amount;
use serde_json::Value;

/// A quantity and the text it was written as (which decides its canonical format).
#[derive(Debug, Clone)]
pub struct Quantity {
    pub amount: Amount,
    text: String,
}

impl Quantity {
    /// A quantity from JSON text; `None` when absent or not a quantity (validation refuses it).
    pub fn from_json(v: &Value) -> Option<Quantity> {
        let text = match v {
            Value::String(s) => s.clone(),
            Value::Number(n) => n.to_string(),
            _ => return None,
        };
        let amount = Amount::parse(&text).ok()?;
        Some(Quantity { amount, text })
    }

    /// `Quantity.String()`.
    pub fn canonical(&self) -> String {
        api::quantity::canonical_as(self.amount, &self.text)
    }

    /// `Quantity.Add`: the sum keeps this quantity's format.
    fn add(&mut self, other: &Quantity) {
        self.amount = self.amount.saturating_add(other.amount);
    }
}

/// A resource list by resource name.
pub type ResourceList = BTreeMap<String, Quantity>;

/// The resource list at `v` (a JSON object of quantities); absent or mistyped entries are left out.
pub fn resource_list(v: Option<&Value>) -> ResourceList {
    let Some(map) = v.and_then(Value::as_object) else {
        return ResourceList::new();
    };
    map.iter()
        .filter_map(|(k, q)| Quantity::from_json(q).map(|q| (k.clone(), q)))
        .collect()
}

/// `resource.MaxMilliValue`.
const MAX_MILLI_VALUE: i128 = (i64::MAX / 1000) as i128;

/// `requestLimitEnforcedValues`: the three at a common precision.
fn enforced_values(
    req: Option<&Quantity>,
    lim: Option<&Quantity>,
    enforced: &Quantity,
) -> [i128; 3] {
    let amounts = [
        req.map(|q| q.amount).unwrap_or_default(),
        lim.map(|q| q.amount).unwrap_or_default(),
        enforced.amount,
    ];
    if amounts.iter().all(|a| a.value() <= MAX_MILLI_VALUE) {
        amounts.map(Amount::milli_value)
    } else {
        amounts.map(Amount::value)
    }
}

/// `minConstraint`.
pub fn min_constraint(
    limit_type: &str,
    resource: &str,
    enforced: &Quantity,
    request: &ResourceList,
    limit: &ResourceList,
) -> Option<String> {
    let (req, lim) = (request.get(resource), limit.get(resource));
    let [observed_req, observed_lim, enforced_value] = enforced_values(req, lim, enforced);
    let min = enforced.canonical();
    let Some(req) = req else {
        return Some(format!(
            "minimum {resource} usage per {limit_type} is {min}.  No request is specified"
        ));
    };
    if observed_req < enforced_value {
        return Some(format!(
            "minimum {resource} usage per {limit_type} is {min}, but request is {}",
            req.canonical()
        ));
    }
    match lim {
        Some(lim) if observed_lim < enforced_value => Some(format!(
            "minimum {resource} usage per {limit_type} is {min}, but limit is {}",
            lim.canonical()
        )),
        _ => None,
    }
}

/// `maxRequestConstraint`: for claims, whose limits are not user input.
pub fn max_request_constraint(
    limit_type: &str,
    resource: &str,
    enforced: &Quantity,
    request: &ResourceList,
) -> Option<String> {
    let req = request.get(resource);
    let [observed_req, _, enforced_value] = enforced_values(req, None, enforced);
    let max = enforced.canonical();
    match req {
        None => Some(format!(
            "maximum {resource} usage per {limit_type} is {max}.  No request is specified"
        )),
        Some(req) if observed_req > enforced_value => Some(format!(
            "maximum {resource} usage per {limit_type} is {max}, but request is {}",
            req.canonical()
        )),
        Some(_) => None,
    }
}

/// `maxConstraint`.
pub fn max_constraint(
    limit_type: &str,
    resource: &str,
    enforced: &Quantity,
    request: &ResourceList,
    limit: &ResourceList,
) -> Option<String> {
    let (req, lim) = (request.get(resource), limit.get(resource));
    let [observed_req, observed_lim, enforced_value] = enforced_values(req, lim, enforced);
    let max = enforced.canonical();
    let Some(lim) = lim else {
        return Some(format!(
            "maximum {resource} usage per {limit_type} is {max}.  No limit is specified"
        ));
    };
    if observed_lim > enforced_value {
        return Some(format!(
            "maximum {resource} usage per {limit_type} is {max}, but limit is {}",
            lim.canonical()
        ));
    }
    match req {
        Some(req) if observed_req > enforced_value => Some(format!(
            "maximum {resource} usage per {limit_type} is {max}, but request is {}",
            req.canonical()
        )),
        _ => None,
    }
}

/// `limitRequestRatioConstraint`; the ratio is shown as Go's `%f`.
pub fn limit_request_ratio_constraint(
    limit_type: &str,
    resource: &str,
    enforced: &Quantity,
    request: &ResourceList,
    limit: &ResourceList,
) -> Option<String> {
    let (req, lim) = (request.get(resource), limit.get(resource));
    let [observed_req, observed_lim, _] = enforced_values(req, lim, enforced);
    let ratio = enforced.canonical();
    if req.is_none() || observed_req == 0 {
        return Some(format!(
            "{resource} max limit to request ratio per {limit_type} is {ratio}, but no request is specified or request is 0"
        ));
    }
    if lim.is_none() || observed_lim == 0 {
        return Some(format!(
            "{resource} max limit to request ratio per {limit_type} is {ratio}, but no limit is specified or limit is 0"
        ));
    }
    let shown = observed_lim as f64 / observed_req as f64;
    let (observed, max) = if enforced.amount.value() <= MAX_MILLI_VALUE {
        (shown * 1000.0, enforced.amount.milli_value() as f64)
    } else {
        (shown, enforced.amount.value() as f64)
    };
    (observed > max).then(|| {
        format!(
            "{resource} max limit to request ratio per {limit_type} is {ratio}, but provided ratio is {shown:.6}"
        )
    })
}

/// `addResourceList`.
fn add_list(list: &mut ResourceList, other: &ResourceList) {
    for (k, q) in other {
        match list.get_mut(k) {
            Some(v) => v.add(q),
            None => {
                list.insert(k.clone(), q.clone());
            }
        }
    }
}

/// `maxResourceList`.
fn max_list(list: &mut ResourceList, other: &ResourceList) {
    for (k, q) in other {
        if list.get(k).is_none_or(|v| q.amount > v.amount) {
            list.insert(k.clone(), q.clone());
        }
    }
}

fn is_sidecar(container: &Value) -> bool {
    container.get("restartPolicy").and_then(Value::as_str) == Some("Always")
}

/// `podRequests` (`field` = `requests`) or `podLimits` (`limits`) of a pod spec.
pub fn pod_total(spec: &Value, field: &str) -> ResourceList {
    let of = |c: &Value| resource_list(c.get("resources").and_then(|r| r.get(field)));
    let list = |key: &str| {
        spec.get(key)
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default()
    };
    let mut total = ResourceList::new();
    for c in &list("containers") {
        add_list(&mut total, &of(c));
    }
    let mut sidecars = ResourceList::new();
    let mut init = ResourceList::new();
    for c in &list("initContainers") {
        let own = of(c);
        let need = if is_sidecar(c) {
            add_list(&mut total, &own);
            add_list(&mut sidecars, &own);
            sidecars.clone()
        } else {
            let mut need = own;
            add_list(&mut need, &sidecars);
            need
        };
        max_list(&mut init, &need);
    }
    max_list(&mut total, &init);
    total
}

/// The items of a LimitRange's `spec.limits` of `limit_type`.
fn items<'a>(limit_range: &'a Value, limit_type: &'a str) -> impl Iterator<Item = &'a Value> {
    limit_range
        .pointer("/spec/limits")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter(move |i| i.get("type").and_then(Value::as_str) == Some(limit_type))
}

/// Checks `min`, `max` and `maxLimitRequestRatio` of `item` against `request` and `limit`.
fn check_item(
    item: &Value,
    limit_type: &str,
    request: &ResourceList,
    limit: &ResourceList,
    errs: &mut Vec<String>,
) {
    let constraints: [(&str, Constraint); 3] = [
        ("min", min_constraint),
        ("max", max_constraint),
        ("maxLimitRequestRatio", limit_request_ratio_constraint),
    ];
    for (field, constraint) in constraints {
        for (resource, enforced) in resource_list(item.get(field)) {
            errs.extend(constraint(limit_type, &resource, &enforced, request, limit));
        }
    }
}

type Constraint = fn(&str, &str, &Quantity, &ResourceList, &ResourceList) -> Option<String>;

/// `PodValidateLimitFunc`: every container and init container against `Container` items, the
/// pod's totals against `Pod` items.
pub fn validate_pod(limit_range: &Value, pod: &Value) -> Vec<String> {
    let mut errs = Vec::new();
    let spec = pod.get("spec").cloned().unwrap_or(Value::Null);
    let Some(all) = limit_range
        .pointer("/spec/limits")
        .and_then(Value::as_array)
    else {
        return errs;
    };
    for item in all {
        match item.get("type").and_then(Value::as_str) {
            Some("Container") => {
                for key in ["containers", "initContainers"] {
                    let containers = spec.get(key).and_then(Value::as_array);
                    for c in containers.into_iter().flatten() {
                        let res = c.get("resources");
                        let request = resource_list(res.and_then(|r| r.get("requests")));
                        let limit = resource_list(res.and_then(|r| r.get("limits")));
                        check_item(item, "Container", &request, &limit, &mut errs);
                    }
                }
            }
            Some("Pod") => {
                let request = pod_total(&spec, "requests");
                let limit = pod_total(&spec, "limits");
                check_item(item, "Pod", &request, &limit, &mut errs);
            }
            _ => {}
        }
    }
    errs
}

/// `PersistentVolumeClaimValidateLimitFunc`: `min` and `max` of `PersistentVolumeClaim` items
/// against the claim's requests (its limits are not user input).
pub fn validate_claim(limit_range: &Value, claim: &Value) -> Vec<String> {
    let mut errs = Vec::new();
    let request = resource_list(claim.pointer("/spec/resources/requests"));
    for item in items(limit_range, "PersistentVolumeClaim") {
        for (resource, enforced) in resource_list(item.get("min")) {
            let none = ResourceList::new();
            let t = "PersistentVolumeClaim";
            errs.extend(min_constraint(t, &resource, &enforced, &request, &none));
        }
        for (resource, enforced) in resource_list(item.get("max")) {
            let t = "PersistentVolumeClaim";
            errs.extend(max_request_constraint(t, &resource, &enforced, &request));
        }
    }
    errs
}

/// `utilerrors.NewAggregate(errs).Error()`: one message as is, several (duplicates dropped) as
/// `[a, b]`; `None` for none.
pub fn aggregate(errs: Vec<String>) -> Option<String> {
    let mut seen: Vec<String> = Vec::new();
    for e in errs {
        if !seen.contains(&e) {
            seen.push(e);
        }
    }
    match seen.len() {
        0 => None,
        1 => seen.pop(),
        _ => Some(format!("[{}]", seen.join(", "))),
    }
}
