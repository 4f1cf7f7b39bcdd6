//! The exposition formats: Prometheus' text format 0.0.4 and OpenMetrics 1.0.0, from
//! one list of [`Family`]s.
//!
//! Names are written as given, so that each family keeps the name
//! memcached_exporter serves in the text format (which is what it serves: its
//! handler does not offer OpenMetrics). OpenMetrics wants a counter's samples named
//! `<family>_total`: a counter whose name ends in `_total` is written as family
//! `<name without _total>` with `_total` samples, and one whose name does not (the
//! exporter's `memcached_uptime_seconds`, `memcached_slab_items_moves_to_cold`, ...)
//! is written as `unknown`, so that its series keeps the exporter's name either way.

use std::fmt::Write as _;

/// A metric family's type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Counter,
    Gauge,
    Histogram,
}

/// A sample's value.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Value {
    Int(u64),
    Float(f64),
}

/// One sample: the family name plus `suffix` (`_bucket`, `_sum`, `_count` for a
/// histogram, empty otherwise), its labels and value.
#[derive(Clone, Debug, PartialEq)]
pub struct Sample {
    pub suffix: &'static str,
    pub labels: Vec<(&'static str, String)>,
    pub value: Value,
}

/// A metric family: name, help, type and samples (at least one, or it is skipped).
#[derive(Clone, Debug, PartialEq)]
pub struct Family {
    pub name: String,
    pub help: &'static str,
    pub kind: Kind,
    pub samples: Vec<Sample>,
}

impl Family {
    pub fn new(name: impl Into<String>, kind: Kind, help: &'static str) -> Family {
        Family {
            name: name.into(),
            help,
            kind,
            samples: Vec::new(),
        }
    }

    /// Adds a sample with `labels` (name, value) pairs.
    pub fn push(&mut self, labels: &[(&'static str, &str)], value: Value) {
        self.push_suffixed("", labels, value);
    }

    pub fn push_suffixed(
        &mut self,
        suffix: &'static str,
        labels: &[(&'static str, &str)],
        value: Value,
    ) {
        self.samples.push(Sample {
            suffix,
            labels: labels.iter().map(|&(k, v)| (k, v.to_string())).collect(),
            value,
        });
    }
}

/// Which format a scraper gets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    Text,
    OpenMetrics,
}

impl Format {
    pub fn content_type(self) -> &'static str {
        match self {
            Format::Text => "text/plain; version=0.0.4; charset=utf-8",
            Format::OpenMetrics => "application/openmetrics-text; version=1.0.0; charset=utf-8",
        }
    }

    /// The format an `Accept` header asks for: OpenMetrics when it names
    /// `application/openmetrics-text` with a quality at least that of any other
    /// type it accepts, the text format otherwise (also with no header).
    pub fn negotiate(accept: Option<&str>) -> Format {
        let Some(accept) = accept else {
            return Format::Text;
        };
        let (mut om, mut other) = (None::<f64>, 0f64);
        for part in accept.split(',') {
            let mut params = part.split(';');
            let media = params.next().unwrap_or("").trim().to_ascii_lowercase();
            let q = params
                .filter_map(|p| p.trim().strip_prefix("q="))
                .find_map(|v| v.trim().parse::<f64>().ok())
                .unwrap_or(1.0);
            if media == "application/openmetrics-text" {
                om = Some(om.unwrap_or(0.0).max(q));
            } else if !media.is_empty() {
                other = other.max(q);
            }
        }
        match om {
            Some(q) if q > 0.0 && q >= other => Format::OpenMetrics,
            _ => Format::Text,
        }
    }
}

/// Renders `families` in `format`.
pub fn encode(families: &[Family], format: Format) -> String {
    let mut out = String::with_capacity(32 * 1024);
    for f in families.iter().filter(|f| !f.samples.is_empty()) {
        let (family, kind, total) = match (format, f.kind) {
            (Format::Text, Kind::Counter) => (f.name.as_str(), "counter", false),
            (Format::Text, Kind::Gauge) => (f.name.as_str(), "gauge", false),
            (_, Kind::Histogram) => (f.name.as_str(), "histogram", false),
            (Format::OpenMetrics, Kind::Gauge) => (f.name.as_str(), "gauge", false),
            (Format::OpenMetrics, Kind::Counter) => match f.name.strip_suffix("_total") {
                Some(base) => (base, "counter", true),
                None => (f.name.as_str(), "unknown", false),
            },
        };
        let _ = writeln!(out, "# HELP {family} {}", escape(f.help, false));
        let _ = writeln!(out, "# TYPE {family} {kind}");
        for s in &f.samples {
            out.push_str(family);
            out.push_str(s.suffix);
            if total {
                out.push_str("_total");
            }
            if !s.labels.is_empty() {
                out.push('{');
                for (i, (k, v)) in s.labels.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    let _ = write!(out, "{k}=\"{}\"", escape(v, true));
                }
                out.push('}');
            }
            out.push(' ');
            match s.value {
                Value::Int(n) => {
                    let _ = write!(out, "{n}");
                }
                Value::Float(x) => out.push_str(&float(x)),
            }
            out.push('\n');
        }
    }
    if format == Format::OpenMetrics {
        out.push_str("# EOF\n");
    }
    out
}

/// A float as both formats spell it (`+Inf`, `-Inf`, `NaN`).
pub fn float(x: f64) -> String {
    if x.is_nan() {
        "NaN".into()
    } else if x.is_infinite() {
        if x > 0.0 { "+Inf" } else { "-Inf" }.into()
    } else {
        format!("{x:?}")
    }
}

/// Escapes a label value (`\`, `"`, newline) or help text (`\`, newline).
fn escape(s: &str, quote: bool) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '"' if quote => out.push_str("\\\""),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn families() -> Vec<Family> {
        let mut c = Family::new("memcached_commands_total", Kind::Counter, "Commands.");
        c.push(&[("command", "get"), ("status", "hit")], Value::Int(3));
        let mut u = Family::new("memcached_uptime_seconds", Kind::Counter, "Up.");
        u.push(&[], Value::Int(7));
        let mut g = Family::new("memcrab_settings_info", Kind::Gauge, "a \\ b\nc");
        g.push(&[("value", "x\"y\\z\nw")], Value::Float(1.5));
        let mut h = Family::new("memcrab_request_duration_seconds", Kind::Histogram, "H.");
        h.push_suffixed("_bucket", &[("le", "0.001")], Value::Int(1));
        h.push_suffixed("_bucket", &[("le", "+Inf")], Value::Int(2));
        h.push_suffixed("_sum", &[], Value::Float(0.25));
        h.push_suffixed("_count", &[], Value::Int(2));
        let empty = Family::new("memcrab_nothing", Kind::Gauge, "skipped");
        vec![c, u, g, h, empty]
    }

    #[test]
    fn text_format() {
        assert_eq!(
            encode(&families(), Format::Text),
            "# HELP memcached_commands_total Commands.\n\
             # TYPE memcached_commands_total counter\n\
             memcached_commands_total{command=\"get\",status=\"hit\"} 3\n\
             # HELP memcached_uptime_seconds Up.\n\
             # TYPE memcached_uptime_seconds counter\n\
             memcached_uptime_seconds 7\n\
             # HELP memcrab_settings_info a \\\\ b\\nc\n\
             # TYPE memcrab_settings_info gauge\n\
             memcrab_settings_info{value=\"x\\\"y\\\\z\\nw\"} 1.5\n\
             # HELP memcrab_request_duration_seconds H.\n\
             # TYPE memcrab_request_duration_seconds histogram\n\
             memcrab_request_duration_seconds_bucket{le=\"0.001\"} 1\n\
             memcrab_request_duration_seconds_bucket{le=\"+Inf\"} 2\n\
             memcrab_request_duration_seconds_sum 0.25\n\
             memcrab_request_duration_seconds_count 2\n"
        );
    }

    #[test]
    fn openmetrics_keeps_every_series_name() {
        let om = encode(&families(), Format::OpenMetrics);
        assert!(om.contains(
            "# TYPE memcached_commands counter\n\
             memcached_commands_total{command=\"get\",status=\"hit\"} 3\n"
        ));
        assert!(
            om.contains("# TYPE memcached_uptime_seconds unknown\nmemcached_uptime_seconds 7\n")
        );
        assert!(om.ends_with("memcrab_request_duration_seconds_count 2\n# EOF\n"));
        assert!(!om.contains("memcrab_nothing"));
    }

    #[test]
    fn accept_headers() {
        // Prometheus 2.42's scrape Accept header.
        let prom = "application/openmetrics-text;version=1.0.0,application/openmetrics-text;\
                    version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1";
        for (accept, want) in [
            (None, Format::Text),
            (Some(prom), Format::OpenMetrics),
            (Some("text/plain;version=0.0.4"), Format::Text),
            (Some("*/*"), Format::Text),
            (
                Some("application/openmetrics-text; version=1.0.0"),
                Format::OpenMetrics,
            ),
            (
                Some("application/openmetrics-text;q=0,text/plain"),
                Format::Text,
            ),
            (
                Some("text/plain;q=0.9,application/openmetrics-text;q=0.5"),
                Format::Text,
            ),
            (Some(";;,,q=;"), Format::Text),
        ] {
            assert_eq!(Format::negotiate(accept), want, "{accept:?}");
        }
    }

    #[test]
    fn floats() {
        assert_eq!(float(f64::INFINITY), "+Inf");
        assert_eq!(float(f64::NEG_INFINITY), "-Inf");
        assert_eq!(float(f64::NAN), "NaN");
        assert_eq!(float(1e-6), "1e-6");
        assert_eq!(float(10.0), "10.0");
    }
}
