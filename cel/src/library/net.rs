//! Kubernetes' IP and CIDR libraries (`library/ip.go`, `library/cidr.go`): `ip`, `isIP`,
//! `ip.isCanonical`, the address predicates, `cidr`, `isCIDR`, `containsIP`, `containsCIDR`,
//! `prefixLength`, `masked`. Parsing follows Go's `netip`: no leading zeros, no zones, and
//! (as upstream adds) no IPv4-mapped IPv6 addresses.

use super::library_type;
use crate::env::{boolean, fail, owned, str_arg, typed, CelResult};
use cel::common::types::{CelInt, CelString, STRING_TYPE};
use cel::common::value::CowVal;
use cel::{DeclarationError, Env, ExecutionError};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

#[derive(Debug, Clone, PartialEq)]
pub struct Ip(IpAddr);

#[derive(Debug, Clone, PartialEq)]
pub struct Cidr {
    addr: IpAddr,
    prefix: u8,
}

library_type!(Ip, IP_TYPE, "net.IP");
library_type!(Cidr, CIDR_TYPE, "net.CIDR");

pub fn register(env: &mut Env) -> Result<(), DeclarationError> {
    let s = || STRING_TYPE.to_owned();
    let i = || IP_TYPE.to_owned();
    let c = || CIDR_TYPE.to_owned();
    env.add_overload("ip", "string_to_ip", vec![s()], ip)?;
    env.add_overload("isIP", "is_ip", vec![s()], is_ip)?;
    env.add_overload("ip.isCanonical", "ip_is_canonical", vec![s()], is_canonical)?;
    env.add_overload("string", "ip_to_string", vec![i()], ip_string)?;
    env.add_member_overload("family", "ip_family", i(), vec![], family)?;
    env.add_member_overload(
        "isUnspecified",
        "ip_is_unspecified",
        i(),
        vec![],
        is_unspecified,
    )?;
    env.add_member_overload("isLoopback", "ip_is_loopback", i(), vec![], is_loopback)?;
    env.add_member_overload(
        "isLinkLocalMulticast",
        "ip_is_link_local_multicast",
        i(),
        vec![],
        is_llm,
    )?;
    env.add_member_overload(
        "isLinkLocalUnicast",
        "ip_is_link_local_unicast",
        i(),
        vec![],
        is_llu,
    )?;
    env.add_member_overload(
        "isGlobalUnicast",
        "ip_is_global_unicast",
        i(),
        vec![],
        is_gu,
    )?;

    env.add_overload("cidr", "string_to_cidr", vec![s()], cidr)?;
    env.add_overload("isCIDR", "is_cidr", vec![s()], is_cidr)?;
    env.add_overload("string", "cidr_to_string", vec![c()], cidr_string)?;
    env.add_member_overload(
        "containsIP",
        "cidr_contains_ip_string",
        c(),
        vec![s()],
        contains_ip,
    )?;
    env.add_member_overload(
        "containsIP",
        "cidr_contains_ip_ip",
        c(),
        vec![i()],
        contains_ip,
    )?;
    env.add_member_overload(
        "containsCIDR",
        "cidr_contains_cidr_string",
        c(),
        vec![s()],
        contains_cidr,
    )?;
    env.add_member_overload(
        "containsCIDR",
        "cidr_contains_cidr",
        c(),
        vec![c()],
        contains_cidr,
    )?;
    env.add_member_overload("ip", "cidr_ip", c(), vec![], cidr_ip)?;
    env.add_member_overload(
        "prefixLength",
        "cidr_prefix_length",
        c(),
        vec![],
        prefix_length,
    )?;
    env.add_member_overload("masked", "cidr_masked", c(), vec![], masked)?;
    Ok(())
}

/// `netip.ParseAddr` plus upstream's refusal of IPv4-mapped IPv6.
fn parse_ip(s: &str) -> Result<IpAddr, String> {
    if s.contains('%') {
        return Err(format!("IP address with zone value is not allowed: {s}"));
    }
    let addr: IpAddr = s
        .parse()
        .map_err(|_| format!("IP Address {} parse error during conversion from string: ParseAddr({}): unable to parse IP", crate::errors::go_quote(s), crate::errors::go_quote(s)))?;
    if let IpAddr::V6(v6) = addr {
        if v6.to_ipv4_mapped().is_some() && s.contains('.') {
            return Err(format!(
                "IPv4-mapped IPv6 address {} is not allowed",
                crate::errors::go_quote(s)
            ));
        }
    }
    Ok(addr)
}

fn parse_cidr(s: &str) -> Result<Cidr, String> {
    let bad = || {
        format!("network address {} parse error during conversion from string: netip.ParsePrefix({}): invalid prefix", crate::errors::go_quote(s), crate::errors::go_quote(s))
    };
    let (a, p) = s.split_once('/').ok_or_else(bad)?;
    let addr = parse_ip(a).map_err(|_| bad())?;
    if p.is_empty()
        || p.len() > 3
        || !p.chars().all(|c| c.is_ascii_digit())
        || (p.len() > 1 && p.starts_with('0'))
    {
        return Err(bad());
    }
    let prefix: u8 = p.parse().map_err(|_| bad())?;
    let max = if addr.is_ipv4() { 32 } else { 128 };
    if prefix > max {
        return Err(bad());
    }
    Ok(Cidr { addr, prefix })
}

fn mask(addr: IpAddr, prefix: u8) -> IpAddr {
    match addr {
        IpAddr::V4(v4) => {
            let bits = u32::from(v4);
            let m = if prefix == 0 {
                0
            } else {
                u32::MAX << (32 - u32::from(prefix))
            };
            IpAddr::V4(Ipv4Addr::from(bits & m))
        }
        IpAddr::V6(v6) => {
            let bits = u128::from(v6);
            let m = if prefix == 0 {
                0
            } else {
                u128::MAX << (128 - u32::from(prefix))
            };
            IpAddr::V6(Ipv6Addr::from(bits & m))
        }
    }
}

fn contains(c: &Cidr, ip: IpAddr) -> bool {
    c.addr.is_ipv4() == ip.is_ipv4() && mask(ip, c.prefix) == mask(c.addr, c.prefix)
}

fn link_local_multicast(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => v4.octets()[..3] == [224, 0, 0],
        IpAddr::V6(v6) => v6.segments()[0] & 0xff0f == 0xff02,
    }
}

fn link_local_unicast(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => v4.octets()[..2] == [169, 254],
        IpAddr::V6(v6) => v6.segments()[0] & 0xffc0 == 0xfe80,
    }
}

/// Go's `Addr.IsGlobalUnicast`.
fn global_unicast(ip: IpAddr) -> bool {
    if ip.is_unspecified() || ip.is_loopback() || ip.is_multicast() || link_local_unicast(ip) {
        return false;
    }
    !matches!(ip, IpAddr::V4(v4) if v4 == Ipv4Addr::BROADCAST)
}

fn err<'b, 'v>(function: &str, e: String) -> CelResult<'b, 'v> {
    fail(function, e)
}

fn ip<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> CelResult<'b, 'v> {
    match parse_ip(str_arg(&args, 0)?) {
        Ok(a) => owned(Ip(a)),
        Err(e) => err("ip", e),
    }
}

fn is_ip<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> CelResult<'b, 'v> {
    boolean(parse_ip(str_arg(&args, 0)?).is_ok())
}

fn is_canonical<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> CelResult<'b, 'v> {
    let s = str_arg(&args, 0)?;
    match parse_ip(s) {
        Ok(a) => boolean(a.to_string() == s),
        Err(e) => err("ip.isCanonical", e),
    }
}

fn this_ip(args: &[CowVal<'_, '_>]) -> Result<IpAddr, ExecutionError> {
    Ok(typed::<Ip>(args, 0)?.0)
}

fn ip_string<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> CelResult<'b, 'v> {
    owned(CelString::from(this_ip(&args)?.to_string()))
}

fn family<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> CelResult<'b, 'v> {
    owned(CelInt::from(if this_ip(&args)?.is_ipv4() { 4 } else { 6 }))
}

fn pred<'b, 'v>(args: Vec<CowVal<'b, 'v>>, f: fn(IpAddr) -> bool) -> CelResult<'b, 'v> {
    boolean(f(this_ip(&args)?))
}

fn is_unspecified<'b, 'v>(a: Vec<CowVal<'b, 'v>>) -> CelResult<'b, 'v> {
    pred(a, |ip| ip.is_unspecified())
}

fn is_loopback<'b, 'v>(a: Vec<CowVal<'b, 'v>>) -> CelResult<'b, 'v> {
    pred(a, |ip| ip.is_loopback())
}

fn is_llm<'b, 'v>(a: Vec<CowVal<'b, 'v>>) -> CelResult<'b, 'v> {
    pred(a, link_local_multicast)
}

fn is_llu<'b, 'v>(a: Vec<CowVal<'b, 'v>>) -> CelResult<'b, 'v> {
    pred(a, link_local_unicast)
}

fn is_gu<'b, 'v>(a: Vec<CowVal<'b, 'v>>) -> CelResult<'b, 'v> {
    pred(a, global_unicast)
}

fn cidr<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> CelResult<'b, 'v> {
    match parse_cidr(str_arg(&args, 0)?) {
        Ok(c) => owned(c),
        Err(e) => err("cidr", e),
    }
}

fn is_cidr<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> CelResult<'b, 'v> {
    boolean(parse_cidr(str_arg(&args, 0)?).is_ok())
}

fn this_cidr<'a>(args: &'a [CowVal<'_, '_>]) -> Result<&'a Cidr, ExecutionError> {
    typed::<Cidr>(args, 0)
}

fn cidr_string<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> CelResult<'b, 'v> {
    let c = this_cidr(&args)?;
    owned(CelString::from(format!("{}/{}", c.addr, c.prefix)))
}

fn contains_ip<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> CelResult<'b, 'v> {
    let c = this_cidr(&args)?;
    let ip = match typed::<Ip>(&args, 1) {
        Ok(ip) => ip.0,
        Err(_) => match parse_ip(str_arg(&args, 1)?) {
            Ok(a) => a,
            Err(e) => return err("containsIP", e),
        },
    };
    boolean(contains(c, ip))
}

fn contains_cidr<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> CelResult<'b, 'v> {
    let c = this_cidr(&args)?;
    let other = match typed::<Cidr>(&args, 1) {
        Ok(o) => o.clone(),
        Err(_) => match parse_cidr(str_arg(&args, 1)?) {
            Ok(o) => o,
            Err(e) => return err("containsCIDR", e),
        },
    };
    boolean(other.prefix >= c.prefix && contains(c, other.addr))
}

fn cidr_ip<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> CelResult<'b, 'v> {
    owned(Ip(this_cidr(&args)?.addr))
}

fn prefix_length<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> CelResult<'b, 'v> {
    owned(CelInt::from(i64::from(this_cidr(&args)?.prefix)))
}

fn masked<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> CelResult<'b, 'v> {
    let c = this_cidr(&args)?;
    owned(Cidr {
        addr: mask(c.addr, c.prefix),
        prefix: c.prefix,
    })
}

#[cfg(test)]
mod tests {
    use crate::library::testing::eval;

    #[test]
    fn ip() {
        assert_eq!(eval("isIP('1.2.3.4')"), "true");
        assert_eq!(eval("isIP('1.2.3.04')"), "false");
        assert_eq!(eval("isIP('::ffff:1.2.3.4')"), "false");
        assert_eq!(eval("isIP('fe80::1%eth0')"), "false");
        assert_eq!(eval("ip('1.2.3.4').family()"), "4");
        assert_eq!(eval("ip('::1').family()"), "6");
        assert_eq!(eval("ip('127.0.0.1').isLoopback()"), "true");
        assert_eq!(eval("ip('10.0.0.1').isLoopback()"), "false");
        assert_eq!(eval("ip('0.0.0.0').isUnspecified()"), "true");
        assert_eq!(eval("ip('224.0.0.1').isLinkLocalMulticast()"), "true");
        assert_eq!(eval("ip('224.0.1.1').isLinkLocalMulticast()"), "false");
        assert_eq!(eval("ip('169.254.1.1').isLinkLocalUnicast()"), "true");
        assert_eq!(eval("ip('fe80::1').isLinkLocalUnicast()"), "true");
        assert_eq!(eval("ip('8.8.8.8').isGlobalUnicast()"), "true");
        assert_eq!(eval("ip('255.255.255.255').isGlobalUnicast()"), "false");
        assert_eq!(eval("ip.isCanonical('2001:db8::1')"), "true");
        assert_eq!(eval("ip.isCanonical('2001:DB8::1')"), "false");
        assert_eq!(eval("ip('1.2.3.4') == ip('1.2.3.4')"), "true");
        assert_eq!(eval("string(ip('1.2.3.4'))"), "\"1.2.3.4\"");
    }

    #[test]
    fn cidr() {
        assert_eq!(eval("isCIDR('10.0.0.0/8')"), "true");
        assert_eq!(eval("isCIDR('10.0.0.0/33')"), "false");
        assert_eq!(eval("isCIDR('10.0.0.0')"), "false");
        assert_eq!(eval("cidr('10.0.0.0/8').containsIP('10.1.2.3')"), "true");
        assert_eq!(
            eval("cidr('10.0.0.0/8').containsIP(ip('11.1.2.3'))"),
            "false"
        );
        assert_eq!(
            eval("cidr('10.0.0.0/8').containsCIDR('10.1.0.0/16')"),
            "true"
        );
        assert_eq!(
            eval("cidr('10.1.0.0/16').containsCIDR('10.0.0.0/8')"),
            "false"
        );
        assert_eq!(eval("cidr('10.1.2.3/8').prefixLength()"), "8");
        assert_eq!(
            eval("string(cidr('10.1.2.3/8').masked())"),
            "\"10.0.0.0/8\""
        );
        assert_eq!(eval("string(cidr('10.1.2.3/8').ip())"), "\"10.1.2.3\"");
        assert_eq!(eval("cidr('::1/128').ip().family()"), "6");
    }
}
