//! Mistakes reported at the node that holds them, and the readers of a node's
//! value (names, integers, rates, sizes, times, mappings with their allowed keys)
//! that every layer above builds on.

use super::yaml::{Node, Sp, describe, yaml_hint};
use crate::PolicyError;
use crate::limits::{ENGINE_COST_NS_MAX, RATE_BPS_MAX};
use crate::units::{self, UnitError};
use serde_saphyr::Location;
use serde_saphyr::options::DuplicateKeyPolicy;

/// Reports mistakes of one file.
#[derive(Clone, Copy)]
pub(super) struct Ctx<'a> {
    pub(super) file: &'a str,
}

pub(super) type Res<T> = Result<T, PolicyError>;

impl Ctx<'_> {
    pub(super) fn at(
        &self,
        loc: &Location,
        message: impl Into<String>,
        hint: Option<String>,
    ) -> PolicyError {
        PolicyError {
            file: self.file.to_owned(),
            line: u32::try_from(loc.line()).unwrap_or(u32::MAX).max(1),
            column: u32::try_from(loc.column()).unwrap_or(u32::MAX).max(1),
            message: message.into(),
            hint,
        }
    }

    pub(super) fn err<T>(
        &self,
        node: &Sp,
        message: impl Into<String>,
        hint: Option<String>,
    ) -> Res<T> {
        Err(self.at(&node.referenced, message, hint))
    }

    fn unit_err(&self, node: &Sp, key: &str, e: UnitError) -> PolicyError {
        self.at(&node.referenced, format!("{key}: {}", e.message), e.hint)
    }

    /// Reads the text into a tree; YAML syntax errors keep the parser's position.
    pub(super) fn read(&self, text: &str) -> Res<Sp> {
        if text
            .lines()
            .all(|line| line.trim().is_empty() || line.trim_start().starts_with('#'))
        {
            return Err(PolicyError {
                file: self.file.to_owned(),
                line: 1,
                column: 1,
                message: "empty file".to_owned(),
                hint: Some("a policy needs at least `link: {rate: ...}` and `tenants:`".into()),
            });
        }
        // Duplicate keys are passed through so that they are reported in our words.
        let options = serde_saphyr::options! {
            duplicate_keys: DuplicateKeyPolicy::PassThrough,
            with_snippet: false,
            // YAML 1.1 reads `y`, `no`, `on` as booleans: fine names for apps.
            strict_booleans: true,
        };
        serde_saphyr::from_str_with_options::<Sp>(text, options).map_err(|e| {
            let (line, column) = e
                .location()
                .map_or((1, 1), |loc| (loc.line().max(1), loc.column().max(1)));
            let text = e.to_string();
            let first = text
                .lines()
                .next()
                .unwrap_or("")
                .trim_start_matches("error: ");
            let message = first
                .strip_prefix(&format!("line {line} column {column}: "))
                .unwrap_or(first);
            PolicyError {
                file: self.file.to_owned(),
                line: u32::try_from(line).unwrap_or(u32::MAX),
                column: u32::try_from(column).unwrap_or(u32::MAX),
                message: format!("not valid YAML: {message}"),
                hint: Some(yaml_hint(message).into()),
            }
        })
    }

    /// The entries of a mapping, checked against the keys it may hold.
    pub(super) fn fields<'n>(&self, node: &'n Sp, what: &str, allowed: &[&str]) -> Res<Fields<'n>> {
        let Node::Map(entries) = &node.value else {
            return self.err(
                node,
                format!("{what} must be a mapping, found {}", describe(&node.value)),
                Some(format!("keys of {what}: {}", allowed.join(", "))),
            );
        };
        let mut fields = Fields {
            at: node,
            entries: Vec::new(),
        };
        for (key, value) in entries {
            let Node::Str(name) = &key.value else {
                return self.err(
                    key,
                    format!(
                        "keys of {what} must be names, found {}",
                        describe(&key.value)
                    ),
                    Some(format!("keys of {what}: {}", allowed.join(", "))),
                );
            };
            if !allowed.contains(&name.as_str()) {
                return self.err(
                    key,
                    format!("unknown key `{name}` in {what}"),
                    Some(format!("allowed keys: {}", allowed.join(", "))),
                );
            }
            if fields.entries.iter().any(|(k, _, _)| *k == name) {
                return self.err(
                    key,
                    format!("duplicate key `{name}` in {what}"),
                    Some("a key appears once in a mapping: remove one".into()),
                );
            }
            fields.entries.push((name.as_str(), key, value));
        }
        Ok(fields)
    }

    pub(super) fn require<'n>(&self, fields: &Fields<'n>, key: &str, what: &str) -> Res<&'n Sp> {
        fields.get(key).ok_or_else(|| {
            self.at(
                &fields.at.referenced,
                format!("missing required key `{key}` in {what}"),
                Some(format!("add `{key}:` to {what}")),
            )
        })
    }

    pub(super) fn integer(&self, node: &Sp, key: &str, min: u64, max: u64) -> Res<u64> {
        let value = match node.value {
            Node::Int(v) => Some(v),
            // YAML 1.1 leftovers such as `011` arrive as floats; whole ones are fine.
            Node::Float(v) if v.fract() == 0.0 && v.abs() < 1e30 => Some(v as i128),
            _ => None,
        };
        match value {
            Some(v) if (i128::from(min)..=i128::from(max)).contains(&v) => Ok(v as u64),
            Some(v) => self.err(
                node,
                format!("{key} {v} is out of range {min}..={max}"),
                Some(format!("write a whole number in {min}..={max}")),
            ),
            None => self.err(
                node,
                format!("{key} must be an integer, found {}", describe(&node.value)),
                Some(format!("write a whole number in {min}..={max}")),
            ),
        }
    }

    pub(super) fn boolean(&self, node: &Sp, key: &str) -> Res<bool> {
        match node.value {
            Node::Bool(v) => Ok(v),
            ref other => self.err(
                node,
                format!("{key} must be true or false, found {}", describe(other)),
                Some(format!("write `{key}: true` or `{key}: false`")),
            ),
        }
    }

    pub(super) fn string<'n>(&self, node: &'n Sp, key: &str) -> Res<&'n str> {
        match &node.value {
            Node::Str(s) => Ok(s),
            other => self.err(
                node,
                format!("{key} must be a string, found {}", describe(other)),
                Some("write a word, quoted if it could read as something else".into()),
            ),
        }
    }

    /// A name as written; `123` is read as an integer by YAML but is a fine name.
    pub(super) fn name(&self, node: &Sp, key: &str) -> Res<String> {
        let name = match &node.value {
            Node::Str(s) => s.clone(),
            Node::Int(v) if *v >= 0 => v.to_string(),
            other => {
                return self.err(
                    node,
                    format!("{key} must be a name, found {}", describe(other)),
                    Some(NAME_HINT.into()),
                );
            }
        };
        if name.len() > NAME_BYTES_MAX {
            return self.err(
                node,
                format!("{key} of {} bytes is too long", name.len()),
                Some(NAME_HINT.into()),
            );
        }
        if name.is_empty()
            || !name
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_' || b == b'-')
        {
            return self.err(
                node,
                format!("invalid {key} `{name}`"),
                Some(NAME_HINT.into()),
            );
        }
        Ok(name)
    }

    /// The text of a scalar that must carry a unit; numbers are passed on so that the
    /// unit parser reports the missing unit.
    pub(super) fn unit_text(&self, node: &Sp, key: &str) -> Res<String> {
        match &node.value {
            Node::Str(s) => Ok(s.clone()),
            Node::Int(v) => Ok(v.to_string()),
            Node::Float(v) => Ok(v.to_string()),
            other => self.err(
                node,
                format!(
                    "{key} must be a quantity with a unit, found {}",
                    describe(other)
                ),
                Some("write a number and its unit, e.g. `10Gbit`, `1500B` or `500ms`".into()),
            ),
        }
    }

    pub(super) fn rate(&self, node: &Sp, key: &str) -> Res<u64> {
        let text = self.unit_text(node, key)?;
        let bps = units::rate_bps(&text).map_err(|e| self.unit_err(node, key, e))?;
        if bps > RATE_BPS_MAX {
            return self.err(
                node,
                format!(
                    "{key} {} is above the bound",
                    units::format_rate(bps as f64)
                ),
                Some(format!(
                    "rates are at most {} (RATE_BPS_MAX)",
                    units::format_rate(RATE_BPS_MAX as f64)
                )),
            );
        }
        Ok(bps)
    }

    pub(super) fn positive_rate(&self, node: &Sp, key: &str) -> Res<u64> {
        match self.rate(node, key)? {
            0 => self.err(
                node,
                format!("{key} must be above 0"),
                Some("write a rate above 0, e.g. `10Mbit`; leave a cap out for none".into()),
            ),
            rate => Ok(rate),
        }
    }

    pub(super) fn size(&self, node: &Sp, key: &str) -> Res<u64> {
        let text = self.unit_text(node, key)?;
        units::size_bytes(&text).map_err(|e| self.unit_err(node, key, e))
    }

    pub(super) fn size_u32(&self, node: &Sp, key: &str, min: u64, max: u64) -> Res<u32> {
        let bytes = self.size(node, key)?;
        if !(min..=max).contains(&bytes) {
            return self.err(
                node,
                format!(
                    "{key} {} is out of range {}..={}",
                    units::format_size(bytes),
                    units::format_size(min),
                    units::format_size(max)
                ),
                Some(format!(
                    "write a size in {}..={}",
                    units::format_size(min),
                    units::format_size(max)
                )),
            );
        }
        Ok(bytes as u32)
    }

    pub(super) fn time(&self, node: &Sp, key: &str) -> Res<u64> {
        let text = self.unit_text(node, key)?;
        units::time_ns(&text).map_err(|e| self.unit_err(node, key, e))
    }

    /// Engine work per packet, bounded so that a run's busy time fits in `u64`.
    pub(super) fn engine_cost(&self, node: &Sp, key: &str) -> Res<u64> {
        let cost = self.time(node, key)?;
        if cost > ENGINE_COST_NS_MAX {
            return self.err(
                node,
                format!("{key} {} is above the bound", units::format_time(cost)),
                Some(format!(
                    "engine work per packet is at most {} (ENGINE_COST_NS_MAX)",
                    units::format_time(ENGINE_COST_NS_MAX)
                )),
            );
        }
        Ok(cost)
    }

    pub(super) fn seq<'n>(&self, node: &'n Sp, key: &str) -> Res<&'n [Sp]> {
        match &node.value {
            Node::Seq(items) => Ok(items),
            other => self.err(
                node,
                format!("{key} must be a list, found {}", describe(other)),
                Some("write `[a, b]`, or one `- item` a line".into()),
            ),
        }
    }
}

pub(super) struct Fields<'n> {
    pub(super) at: &'n Sp,
    pub(super) entries: Vec<(&'n str, &'n Sp, &'n Sp)>,
}

impl<'n> Fields<'n> {
    pub(super) fn get(&self, key: &str) -> Option<&'n Sp> {
        self.entries
            .iter()
            .find(|(k, _, _)| *k == key)
            .map(|&(_, _, value)| value)
    }

    /// Where `key` itself was written, for a key that is wrong where it stands.
    pub(super) fn key(&self, key: &str) -> Option<&'n Sp> {
        self.entries
            .iter()
            .find(|(k, _, _)| *k == key)
            .map(|&(_, key, _)| key)
    }
}

/// Names of tenants, apps, traffic and scenarios: they label table columns, files
/// and lab interfaces.
pub(super) const NAME_BYTES_MAX: usize = 64;
const NAME_HINT: &str = "names have 1 to 64 characters of a-z, 0-9, `_` and `-`";
