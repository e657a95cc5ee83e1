//! The functions a script calls by name, without `await` or `tools.`: `list_tools`, `describe_tool` and `text`.

use crate::catalog::ScriptTools;
use crate::convert::to_python;
use monty_types::{ExcType, MontyException, MontyObject};
use serde_json::{Value, json};

pub const HELPERS: &[&str] = &["list_tools", "describe_tool", "text"];

/// Runs helper `name`; `None` when no helper has that name.
pub fn call(
    catalog: &ScriptTools,
    name: &str,
    args: Vec<MontyObject>,
    kwargs: Vec<(MontyObject, MontyObject)>,
) -> Option<Result<MontyObject, MontyException>> {
    let result = match name {
        "list_tools" => Params::bind(name, &["query"], args, kwargs).map(|mut p| list_tools(catalog, p.take(0))),
        "describe_tool" => {
            Params::bind(name, &["name"], args, kwargs).and_then(|mut p| describe_tool(catalog, p.take(0)))
        }
        "text" => Params::bind(name, &["value", "limit", "unit"], args, kwargs)
            .and_then(|mut p| text(p.take(0), p.take(1), p.take(2))),
        _ => return None,
    };
    Some(result)
}

/// Positional and keyword arguments matched to parameter names.
struct Params(Vec<Option<MontyObject>>);

impl Params {
    fn bind(
        function: &str,
        names: &[&str],
        args: Vec<MontyObject>,
        kwargs: Vec<(MontyObject, MontyObject)>,
    ) -> Result<Self, MontyException> {
        if args.len() > names.len() {
            return Err(type_error(format!("{function}() takes at most {} arguments", names.len())));
        }
        let mut slots: Vec<Option<MontyObject>> = names.iter().map(|_| None).collect();
        for (slot, arg) in slots.iter_mut().zip(args) {
            *slot = Some(arg);
        }
        for (key, value) in kwargs {
            let MontyObject::String(key) = key else {
                return Err(type_error(format!("{function}() keywords must be strings")));
            };
            let Some(index) = names.iter().position(|n| *n == key) else {
                return Err(type_error(format!("{function}() got an unexpected keyword argument '{key}'")));
            };
            if slots[index].replace(value).is_some() {
                return Err(type_error(format!("{function}() got multiple values for argument '{key}'")));
            }
        }
        Ok(Self(slots))
    }

    /// The argument, `None` when not given or given as `None`.
    fn take(&mut self, index: usize) -> Option<MontyObject> {
        self.0.get_mut(index).and_then(Option::take).filter(|value| *value != MontyObject::None)
    }
}

fn list_tools(catalog: &ScriptTools, query: Option<MontyObject>) -> MontyObject {
    let query = query.map(|q| q.to_string().to_lowercase());
    let matches = catalog.entries().iter().filter(|entry| match &query {
        None => true,
        Some(q) => {
            entry.ident.to_lowercase().contains(q)
                || entry.name.to_lowercase().contains(q)
                || entry.description.to_lowercase().contains(q)
        }
    });
    to_python(Value::Array(matches.map(|entry| json!({"name": entry.ident, "summary": entry.summary()})).collect()))
}

fn describe_tool(catalog: &ScriptTools, name: Option<MontyObject>) -> Result<MontyObject, MontyException> {
    let Some(MontyObject::String(name)) = name else {
        return Err(value_error("describe_tool() needs the tool's name as a str".into()));
    };
    let Some(entry) = catalog.find(&name) else {
        return Err(value_error(format!("no tool named `{name}`; list_tools() lists the tools a script can call")));
    };
    Ok(to_python(json!({
        "name": entry.ident,
        "signature": entry.signature,
        "description": entry.description,
        "parameters": entry.parameters,
    })))
}

/// `value` as text (a str as it is, anything else as indented JSON), cut to `limit` characters, lines or UTF-8
/// bytes keeping its start, with a marker saying how much was left out.
fn text(
    value: Option<MontyObject>,
    limit: Option<MontyObject>,
    unit: Option<MontyObject>,
) -> Result<MontyObject, MontyException> {
    let text = match value {
        Some(MontyObject::String(s)) => s,
        None => "None".into(),
        Some(other) => {
            let json = crate::convert::to_result(other);
            serde_json::to_string_pretty(&json).unwrap_or_else(|_| json.to_string())
        }
    };
    let limit = match limit {
        None => 2_000,
        Some(MontyObject::Int(n)) if n >= 0 => usize::try_from(n).unwrap_or(usize::MAX),
        Some(_) => return Err(value_error("text(): limit must be an int of 0 or more".into())),
    };
    let unit = match unit {
        None => "chars".to_string(),
        Some(MontyObject::String(u)) => u,
        Some(_) => return Err(value_error("text(): unit must be \"chars\", \"lines\" or \"bytes\"".into())),
    };
    let cut = match unit.as_str() {
        "chars" => {
            let total = text.chars().count();
            text.char_indices().nth(limit).map(|(at, _)| (at, total - limit, "characters"))
        }
        "lines" => {
            let total = text.lines().count();
            (total > limit).then(|| {
                let at = text.match_indices('\n').nth(limit.saturating_sub(1)).map_or(0, |(at, _)| at + 1);
                (if limit == 0 { 0 } else { at }, total - limit, "lines")
            })
        }
        "bytes" => (text.len() > limit).then(|| {
            let mut at = limit;
            while !text.is_char_boundary(at) {
                at -= 1;
            }
            (at, text.len() - at, "bytes")
        }),
        other => return Err(value_error(format!("text(): unknown unit `{other}`; use chars, lines or bytes"))),
    };
    Ok(MontyObject::String(match cut {
        None => text,
        Some((at, omitted, what)) => format!("{}… [{omitted} more {what}]", &text[..at]),
    }))
}

fn value_error(message: String) -> MontyException {
    MontyException::new(ExcType::ValueError, Some(message))
}

fn type_error(message: String) -> MontyException {
    MontyException::new(ExcType::TypeError, Some(message))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run_text(value: &str, limit: i64, unit: &str) -> String {
        let out = text(
            Some(MontyObject::String(value.into())),
            Some(MontyObject::Int(limit)),
            Some(MontyObject::String(unit.into())),
        );
        match out {
            Ok(MontyObject::String(s)) => s,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn text_cuts_by_chars_lines_and_bytes() {
        assert_eq!(run_text("héllo", 10, "chars"), "héllo");
        assert_eq!(run_text("héllo", 2, "chars"), "hé… [3 more characters]");
        assert_eq!(run_text("a\nb\nc\n", 2, "lines"), "a\nb\n… [1 more lines]");
        assert_eq!(run_text("héllo", 2, "bytes"), "h… [5 more bytes]");
    }
}
