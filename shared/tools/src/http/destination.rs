//! `[tools.http_client] deny_private_networks` (on by default): which addresses `http_request` may connect to.
//!
//! The check is made on the address the connection really goes to, so a name cannot be checked once and
//! resolved differently a moment later: [`DenyingResolver`] is the client's DNS resolver and hands reqwest only
//! the addresses that pass. A host written as an IP address is never resolved, so [`check_url`] covers those,
//! before the first request and at every redirect hop. reqwest reaches a proxy instead of the destination, so the
//! client built with the check uses none.

use reqwest::dns::{Addrs, Name, Resolve, Resolving};
use reqwest::{Url, redirect};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::Arc;

/// The name of the range an address may not be reached in, or `None` when it may be.
pub type Classifier = Arc<dyn Fn(IpAddr) -> Option<&'static str> + Send + Sync>;

/// The classifier the setting turns on: [`denied_range`].
pub fn internal_ranges() -> Classifier {
    Arc::new(denied_range)
}

/// A request refused by the setting. Returned by the resolver and the redirect policy as the cause of reqwest's
/// error, and found there again by [`find_denial`].
#[derive(Debug, Clone)]
pub struct DestinationDenied {
    /// The host as the URL names it.
    pub host: String,
    /// The address it is, or resolved to.
    pub addr: IpAddr,
    pub range: &'static str,
}

impl std::fmt::Display for DestinationDenied {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let Self { host, addr, range } = self;
        if host.trim_start_matches('[').trim_end_matches(']').parse::<IpAddr>().ok() == Some(*addr) {
            write!(f, "{addr} is a {range} address")?;
        } else {
            write!(f, "{host} resolves to {addr}, a {range} address")?;
        }
        f.write_str(
            "; http_request does not reach loopback, private, link-local, CGNAT, multicast and other internal \
             addresses unless [tools.http_client] deny_private_networks = false",
        )
    }
}

impl std::error::Error for DestinationDenied {}

/// Loopback, private (RFC 1918, fc00::/7, deprecated fec0::/10), link-local (169.254/16 with the cloud
/// metadata address, fe80::/10), CGNAT (100.64/10), unspecified (0/8, ::), multicast, broadcast and the
/// reserved 240/4; in IPv6 also the IPv4-mapped, IPv4-compatible, NAT64 (64:ff9b::/96) and 6to4 (2002::/16)
/// forms of those IPv4 ranges, which reach the embedded IPv4 address.
pub fn denied_range(ip: IpAddr) -> Option<&'static str> {
    match ip {
        IpAddr::V4(v4) => denied_v4(v4),
        IpAddr::V6(v6) => denied_v6(v6),
    }
}

fn denied_v4(ip: Ipv4Addr) -> Option<&'static str> {
    let [a, b, ..] = ip.octets();
    if ip.is_loopback() {
        Some("loopback")
    } else if ip.is_private() {
        Some("private")
    } else if ip.is_link_local() {
        Some("link-local")
    } else if a == 100 && (64..128).contains(&b) {
        Some("CGNAT")
    } else if a == 0 {
        Some("unspecified")
    } else if ip.is_multicast() {
        Some("multicast")
    } else if ip.is_broadcast() {
        Some("broadcast")
    } else if a >= 240 {
        Some("reserved")
    } else if a == 192 && b == 0 && ip.octets()[2] == 0 {
        // IETF protocol assignments: DS-Lite, and cloud metadata (Oracle's 192.0.0.192).
        Some("IETF protocol assignments")
    } else if a == 198 && (18..20).contains(&b) {
        Some("benchmarking")
    } else {
        None
    }
}

fn denied_v6(ip: Ipv6Addr) -> Option<&'static str> {
    let segments = ip.segments();
    if ip.is_loopback() {
        return Some("loopback");
    }
    if ip.is_unspecified() {
        return Some("unspecified");
    }
    if let Some(v4) = embedded_v4(ip) {
        return denied_v4(v4);
    }
    if ip.is_unique_local() || segments[0] & 0xffc0 == 0xfec0 {
        Some("private")
    } else if ip.is_unicast_link_local() {
        Some("link-local")
    } else if ip.is_multicast() {
        Some("multicast")
    } else {
        None
    }
}

/// The IPv4 address an IPv6 address stands for: mapped (::ffff:a.b.c.d), compatible (::a.b.c.d), NAT64
/// (64:ff9b::a.b.c.d, and the local-use 64:ff9b:1::/48) or 6to4 (2002:AABB:CCDD::/48).
fn embedded_v4(ip: Ipv6Addr) -> Option<Ipv4Addr> {
    let s = ip.segments();
    let low = |hi: u16, lo: u16| Ipv4Addr::from((u32::from(hi) << 16) | u32::from(lo));
    if let Some(v4) = ip.to_ipv4_mapped() {
        Some(v4)
    } else if s[..6] == [0; 6] || s[..6] == [0x64, 0xff9b, 0, 0, 0, 0] || s[..3] == [0x64, 0xff9b, 1] {
        Some(low(s[6], s[7]))
    } else if s[0] == 0x2002 {
        Some(low(s[1], s[2]))
    } else {
        None
    }
}

/// A URL whose host is an IP address that may not be reached. Names pass here: the resolver checks them.
pub fn check_url(url: &Url, classifier: &Classifier) -> Result<(), DestinationDenied> {
    // The URL parser has already turned every IPv4 spelling (`2130706433`, `0x7f.1`) into dotted form.
    let Some(host) = url.host_str() else {
        return Ok(());
    };
    let Ok(addr) = host.trim_start_matches('[').trim_end_matches(']').parse::<IpAddr>() else {
        return Ok(());
    };
    match classifier(addr) {
        Some(range) => Err(DestinationDenied { host: host.to_string(), addr, range }),
        None => Ok(()),
    }
}

/// reqwest's redirect policy with every hop's URL checked first; past `max` hops, reqwest's own "too many
/// redirects".
pub fn checked_redirects(max: usize, classifier: Classifier) -> redirect::Policy {
    let limited = redirect::Policy::limited(max);
    redirect::Policy::custom(move |attempt| match check_url(attempt.url(), &classifier) {
        Err(denied) => attempt.error(denied),
        Ok(()) => limited.redirect(attempt),
    })
}

/// The system resolver with the addresses the classifier denies taken out; a name left with none fails with
/// [`DestinationDenied`], so no connection is made.
pub struct DenyingResolver {
    classifier: Classifier,
}

impl DenyingResolver {
    pub fn new(classifier: Classifier) -> Self {
        Self { classifier }
    }
}

impl Resolve for DenyingResolver {
    fn resolve(&self, name: Name) -> Resolving {
        let classifier = Arc::clone(&self.classifier);
        let host = name.as_str().to_string();
        Box::pin(async move {
            let resolved: Vec<SocketAddr> = tokio::net::lookup_host((host.as_str(), 0)).await?.collect();
            let mut denied = None;
            let allowed: Vec<SocketAddr> = resolved
                .into_iter()
                .filter(|addr| match classifier(addr.ip()) {
                    Some(range) => {
                        denied.get_or_insert((addr.ip(), range));
                        false
                    }
                    None => true,
                })
                .collect();
            match (allowed.is_empty(), denied) {
                (true, Some((addr, range))) => Err(DestinationDenied { host, addr, range }.into()),
                _ => Ok(Box::new(allowed.into_iter()) as Addrs),
            }
        })
    }
}

/// The refusal behind a failed request, if the setting caused it.
pub fn find_denial<'e>(error: &'e (dyn std::error::Error + 'static)) -> Option<&'e DestinationDenied> {
    let mut current = Some(error);
    while let Some(error) = current {
        if let Some(denied) = error.downcast_ref::<DestinationDenied>() {
            return Some(denied);
        }
        current = error.source();
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn range(text: &str) -> Option<&'static str> {
        denied_range(text.parse().unwrap())
    }

    #[test]
    fn internal_ranges_are_named_and_public_addresses_pass() {
        for (addr, expected) in [
            ("127.0.0.1", "loopback"),
            ("127.255.0.9", "loopback"),
            ("10.1.2.3", "private"),
            ("172.16.0.1", "private"),
            ("172.31.255.255", "private"),
            ("192.168.1.1", "private"),
            ("169.254.169.254", "link-local"),
            ("100.64.0.1", "CGNAT"),
            ("100.127.255.254", "CGNAT"),
            ("0.0.0.0", "unspecified"),
            ("0.1.2.3", "unspecified"),
            ("224.0.0.1", "multicast"),
            ("255.255.255.255", "broadcast"),
            ("240.0.0.1", "reserved"),
            ("::1", "loopback"),
            ("::", "unspecified"),
            ("fc00::1", "private"),
            ("fd12:3456::1", "private"),
            ("fec0::1", "private"),
            ("fe80::1", "link-local"),
            ("ff02::1", "multicast"),
            ("::ffff:127.0.0.1", "loopback"),
            ("::ffff:169.254.169.254", "link-local"),
            ("::ffff:10.0.0.1", "private"),
            ("::127.0.0.1", "loopback"),
            ("64:ff9b::a9fe:a9fe", "link-local"),
            ("2002:c0a8:0101::1", "private"),
            ("192.0.0.192", "IETF protocol assignments"),
            ("198.18.0.1", "benchmarking"),
            ("64:ff9b:1::7f00:1", "loopback"),
        ] {
            assert_eq!(range(addr), Some(expected), "{addr}");
        }
        for addr in [
            "8.8.8.8",
            "1.1.1.1",
            "100.63.255.255",
            "100.128.0.1",
            "172.32.0.1",
            "192.0.2.1",
            "198.20.0.1",
            "2606:4700::1111",
            "::ffff:8.8.8.8",
        ] {
            assert_eq!(range(addr), None, "{addr}");
        }
    }

    #[test]
    fn ip_literal_urls_are_checked_in_every_spelling_the_url_parser_accepts() {
        let classifier = internal_ranges();
        for url in [
            "http://127.0.0.1/",
            "http://2130706433/",
            "http://0x7f.1/",
            "http://[::1]:8080/",
            "http://[::ffff:7f00:1]/",
            "http://169.254.169.254/latest/meta-data/",
        ] {
            let denied = check_url(&Url::parse(url).unwrap(), &classifier).unwrap_err();
            assert!(denied.to_string().contains("deny_private_networks"), "{url}: {denied}");
        }
        assert!(check_url(&Url::parse("http://8.8.8.8/").unwrap(), &classifier).is_ok());
        assert!(check_url(&Url::parse("http://localhost/").unwrap(), &classifier).is_ok(), "names go to the resolver");
    }

    #[tokio::test]
    async fn the_resolver_hands_out_only_allowed_addresses() {
        let resolver = DenyingResolver::new(internal_ranges());
        let error = match resolver.resolve("localhost".parse().unwrap()).await {
            Ok(addrs) => panic!("localhost resolved to {:?}", addrs.collect::<Vec<_>>()),
            Err(error) => error,
        };
        let denied = find_denial(error.as_ref()).unwrap();
        assert_eq!(denied.host, "localhost");
        assert_eq!(denied.range, "loopback");
        // A classifier that allows 127.0.0.1 but not ::1 keeps the allowed address only.
        let only_v4: Classifier = Arc::new(|ip: IpAddr| ip.is_ipv6().then_some("test"));
        let addrs: Vec<SocketAddr> =
            DenyingResolver::new(only_v4).resolve("localhost".parse().unwrap()).await.unwrap().collect();
        assert!(!addrs.is_empty() && addrs.iter().all(SocketAddr::is_ipv4), "{addrs:?}");
    }
}
