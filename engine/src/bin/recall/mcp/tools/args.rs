//! A tool's arguments as the client sent them, taken one by one: aliases,
//! bounds, and the arguments the server's policy decides, refused.

use serde_json::{Map, Value};
use uuid::Uuid;

use super::{ToolError, ToolErrorKind, snippet};

/// A tool's arguments, taken one by one under their names and aliases; what
/// is left at the end was not understood, and is an error rather than
/// silently ignored.
pub(super) struct Args {
    tool: String,
    map: Map<String, Value>,
}

/// Arguments no tool takes because the server's configuration decides them.
const FIXED_BY_SERVER: [&str; 6] = ["tenant", "bank", "banks", "read", "session", "session_id"];

impl Args {
    pub(super) fn new(tool: &str, map: Map<String, Value>) -> Result<Args, ToolError> {
        if let Some(name) = FIXED_BY_SERVER.iter().find(|n| map.contains_key(**n)) {
            return Err(ToolError::new(
                ToolErrorKind::Refused,
                format!(
                    "`{name}` cannot be chosen by a tool call: the tenant, the banks and the session are fixed by the server's configuration"
                ),
            ));
        }
        Ok(Args {
            tool: tool.to_string(),
            map,
        })
    }

    /// The first present of `names`, removed; an alias given beside its
    /// canonical name is an error (which one was meant?).
    pub(super) fn take(&mut self, names: &[&str]) -> Result<Option<(String, Value)>, ToolError> {
        let present: Vec<&str> = names
            .iter()
            .copied()
            .filter(|n| self.map.get(*n).is_some_and(|v| !v.is_null()))
            .collect();
        if present.len() > 1 {
            return Err(ToolError::invalid(format!(
                "give only one of {}",
                present.join(", ")
            )));
        }
        for n in names {
            if let Some(v) = self.map.remove(*n)
                && !v.is_null()
            {
                return Ok(Some((n.to_string(), v)));
            }
        }
        Ok(None)
    }

    pub(super) fn string(&mut self, names: &[&str]) -> Result<Option<String>, ToolError> {
        match self.take(names)? {
            None => Ok(None),
            Some((_, Value::String(s))) => Ok(Some(s)),
            Some((name, _)) => Err(ToolError::invalid(format!("`{name}` must be a string"))),
        }
    }

    pub(super) fn required_string(&mut self, names: &[&str]) -> Result<String, ToolError> {
        self.string(names)?
            .ok_or_else(|| ToolError::invalid(format!("`{}` is required", names[0])))
    }

    /// A count: a JSON integer, or a string holding one (models send both).
    pub(super) fn count(
        &mut self,
        names: &[&str],
        min: usize,
        max: usize,
    ) -> Result<Option<usize>, ToolError> {
        let Some((name, value)) = self.take(names)? else {
            return Ok(None);
        };
        let n = match &value {
            Value::Number(n) => n.as_u64(),
            Value::String(s) => s.trim().parse::<u64>().ok(),
            _ => None,
        };
        match n.and_then(|n| usize::try_from(n).ok()) {
            Some(n) if (min..=max).contains(&n) => Ok(Some(n)),
            _ => Err(ToolError::invalid(format!(
                "`{name}` must be a whole number from {min} to {max}"
            ))),
        }
    }

    /// A list of strings: a JSON array of strings, or one string.
    pub(super) fn strings(&mut self, names: &[&str]) -> Result<Vec<String>, ToolError> {
        match self.take(names)? {
            None => Ok(Vec::new()),
            Some((_, Value::String(s))) => Ok(vec![s]),
            Some((name, Value::Array(items))) => items
                .into_iter()
                .map(|v| match v {
                    Value::String(s) => Ok(s),
                    _ => Err(ToolError::invalid(format!(
                        "`{name}` must be a list of strings"
                    ))),
                })
                .collect(),
            Some((name, _)) => Err(ToolError::invalid(format!(
                "`{name}` must be a list of strings"
            ))),
        }
    }

    /// A yes or no: a JSON boolean, or the string `true` or `false`.
    pub(super) fn flag(&mut self, names: &[&str]) -> Result<Option<bool>, ToolError> {
        match self.take(names)? {
            None => Ok(None),
            Some((_, Value::Bool(b))) => Ok(Some(b)),
            Some((_, Value::String(s))) if s.trim() == "true" => Ok(Some(true)),
            Some((_, Value::String(s))) if s.trim() == "false" => Ok(Some(false)),
            Some((name, _)) => Err(ToolError::invalid(format!(
                "`{name}` must be true or false"
            ))),
        }
    }

    pub(super) fn id(&mut self, names: &[&str]) -> Result<Uuid, ToolError> {
        let text = self.required_string(names)?;
        parse_id(names[0], &text)
    }

    pub(super) fn ids(&mut self, names: &[&str]) -> Result<Vec<Uuid>, ToolError> {
        self.strings(names)?
            .iter()
            .map(|s| parse_id(names[0], s))
            .collect()
    }

    /// Fails on whatever was not taken.
    pub(super) fn finish(&self) -> Result<(), ToolError> {
        match self.map.keys().next() {
            None => Ok(()),
            Some(key) => Err(ToolError::invalid(format!(
                "`{}` does not take `{key}`; see its input schema",
                self.tool
            ))),
        }
    }
}

fn parse_id(name: &str, text: &str) -> Result<Uuid, ToolError> {
    Uuid::parse_str(text.trim()).map_err(|_| {
        ToolError::invalid(format!(
            "`{name}` must be a memory id (a UUID as returned by remember or recall), not `{}`",
            snippet(text, 40)
        ))
    })
}
