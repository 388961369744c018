//! Kubernetes' format library (`library/format.go`): `format.named(name)` and `format.<name>()`
//! give a `Format`, whose `validate(string)` is `optional.none()` for a valid value and the list
//! of problems otherwise. The name checks are apimachinery's (`api::validation`).

use super::library_type;
use crate::env::{owned, str_arg, typed, CelResult};
use base64::Engine;
use cel::common::types::{CelList, CelOptional, CelString, STRING_TYPE};
use cel::common::value::{CowVal, Val};
use cel::{DeclarationError, Env};

#[derive(Debug, Clone, PartialEq)]
pub struct Format(&'static str);

library_type!(Format, FORMAT_TYPE, "kubernetes.NamedFormat");

const NAMES: &[&str] = &[
    "dns1123Label",
    "dns1123Subdomain",
    "dns1035Label",
    "qualifiedName",
    "dns1123LabelPrefix",
    "dns1123SubdomainPrefix",
    "dns1035LabelPrefix",
    "labelValue",
    "uri",
    "uuid",
    "byte",
    "date",
    "datetime",
];

macro_rules! constructors {
    ($($name:literal => $fn:ident),* $(,)?) => {
        $(
            fn $fn<'b, 'v>(_args: Vec<CowVal<'b, 'v>>) -> CelResult<'b, 'v> {
                owned(Format($name))
            }
        )*
        fn register_constructors(env: &mut Env) -> Result<(), DeclarationError> {
            $( env.add_overload(concat!("format.", $name), concat!("format_", $name), vec![], $fn)?; )*
            Ok(())
        }
    };
}

constructors! {
    "dns1123Label" => dns1123_label,
    "dns1123Subdomain" => dns1123_subdomain,
    "dns1035Label" => dns1035_label,
    "qualifiedName" => qualified_name,
    "dns1123LabelPrefix" => dns1123_label_prefix,
    "dns1123SubdomainPrefix" => dns1123_subdomain_prefix,
    "dns1035LabelPrefix" => dns1035_label_prefix,
    "labelValue" => label_value,
    "uri" => uri,
    "uuid" => uuid,
    "byte" => byte,
    "date" => date,
    "datetime" => datetime,
}

pub fn register(env: &mut Env) -> Result<(), DeclarationError> {
    register_constructors(env)?;
    env.add_overload(
        "format.named",
        "format_named",
        vec![STRING_TYPE.to_owned()],
        named,
    )?;
    env.add_member_overload(
        "validate",
        "format_validate",
        FORMAT_TYPE.to_owned(),
        vec![STRING_TYPE.to_owned()],
        validate,
    )?;
    Ok(())
}

fn named<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> CelResult<'b, 'v> {
    let name = str_arg(&args, 0)?;
    match NAMES.iter().find(|n| **n == name) {
        Some(n) => owned(CelOptional::of(Box::new(Format(n)))),
        None => owned(CelOptional::none()),
    }
}

fn problems(format: &str, s: &str) -> Vec<String> {
    use api::validation as v;
    match format {
        "dns1123Label" => v::is_dns1123_label(s),
        "dns1123Subdomain" => v::is_dns1123_subdomain(s),
        "dns1035Label" => v::is_dns1035_label(s),
        "qualifiedName" => v::is_qualified_name(s),
        "dns1123LabelPrefix" => v::name_is_dns1123_label(s, true),
        "dns1123SubdomainPrefix" => v::name_is_dns1123_subdomain(s, true),
        "dns1035LabelPrefix" => v::name_is_dns1035_label(s, true),
        "labelValue" => v::is_valid_label_value(s),
        "uri" => super::urls::parse(s).err().into_iter().collect(),
        "uuid" => {
            let ok = s.len() == 36
                && s.char_indices().all(|(i, c)| match i {
                    8 | 13 | 18 | 23 => c == '-',
                    _ => c.is_ascii_hexdigit(),
                });
            if ok {
                vec![]
            } else {
                vec!["does not match the UUID format".to_owned()]
            }
        }
        "byte" => match base64::engine::general_purpose::STANDARD.decode(s) {
            Ok(_) => vec![],
            Err(_) => vec!["invalid base64".to_owned()],
        },
        "date" => match chrono::NaiveDate::parse_from_str(s, "%Y-%m-%d") {
            Ok(_) => vec![],
            Err(_) => vec!["invalid date".to_owned()],
        },
        "datetime" => match chrono::DateTime::parse_from_rfc3339(s) {
            Ok(_) => vec![],
            Err(_) => vec!["invalid datetime".to_owned()],
        },
        _ => vec![],
    }
}

fn validate<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> CelResult<'b, 'v> {
    let format = typed::<Format>(&args, 0)?.0;
    let found = problems(format, str_arg(&args, 1)?);
    if found.is_empty() {
        return owned(CelOptional::none());
    }
    let list: Vec<Box<dyn Val>> = found
        .into_iter()
        .map(|p| Box::new(CelString::from(p)) as Box<dyn Val>)
        .collect();
    owned(CelOptional::of(Box::new(CelList::from(list))))
}

#[cfg(test)]
mod tests {
    use crate::library::testing::eval;

    #[test]
    fn formats() {
        assert_eq!(
            eval("!format.dns1123Label().validate('my-name').hasValue()"),
            "true"
        );
        assert_eq!(
            eval("format.dns1123Label().validate('My_Name').hasValue()"),
            "true"
        );
        assert_eq!(
            eval("format.named('dns1123Subdomain').value().validate('a.b').hasValue()"),
            "false"
        );
        assert_eq!(eval("format.named('nope').hasValue()"), "false");
        assert_eq!(
            eval("format.labelValue().validate('a_b').hasValue()"),
            "false"
        );
        assert_eq!(
            eval("format.labelValue().validate('-a').hasValue()"),
            "true"
        );
        assert_eq!(
            eval("format.uuid().validate('123e4567-e89b-12d3-a456-426614174000').hasValue()"),
            "false"
        );
        assert_eq!(
            eval("format.uuid().validate('123e4567').hasValue()"),
            "true"
        );
        assert_eq!(
            eval("format.date().validate('2024-01-31').hasValue()"),
            "false"
        );
        assert_eq!(
            eval("format.datetime().validate('2024-01-31').hasValue()"),
            "true"
        );
    }
}
