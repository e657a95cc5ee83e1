//! Values across the sandbox boundary: tool arguments leave a script as JSON, tool results enter it as Python
//! values, and the script's final value leaves as JSON.

use monty_types::{DictPairs, MontyObject};
use serde_json::{Map, Number, Value};

/// A Python value as JSON for a tool's arguments; `Err` names what cannot be passed.
pub fn to_argument(object: MontyObject) -> Result<Value, String> {
    Ok(match object {
        MontyObject::None => Value::Null,
        MontyObject::Bool(b) => Value::Bool(b),
        MontyObject::Int(i) => Value::from(i),
        MontyObject::BigInt(i) => i.to_string().parse::<Number>().map(Value::Number).map_err(|e| e.to_string())?,
        MontyObject::Float(f) => Number::from_f64(f).map(Value::Number).ok_or("a float that is not finite")?,
        MontyObject::String(s) | MontyObject::Path(s) => Value::String(s),
        MontyObject::List(items)
        | MontyObject::Tuple(items)
        | MontyObject::Set(items)
        | MontyObject::FrozenSet(items) => Value::Array(items.into_iter().map(to_argument).collect::<Result<_, _>>()?),
        MontyObject::NamedTuple { values, .. } => {
            Value::Array(values.into_iter().map(to_argument).collect::<Result<_, _>>()?)
        }
        MontyObject::Dict(pairs) => {
            let mut map = Map::new();
            for (key, value) in pairs {
                let MontyObject::String(key) = key else {
                    return Err(format!("a dict key that is not a str ({})", key.type_name()));
                };
                map.insert(key, to_argument(value)?);
            }
            Value::Object(map)
        }
        MontyObject::Date(_) | MontyObject::DateTime(_) | MontyObject::Time(_) | MontyObject::TimeDelta(_) => {
            Value::String(object.to_string())
        }
        other => return Err(format!("a {} value", other.type_name())),
    })
}

/// A tool result as a Python value: objects become dicts, arrays lists.
pub fn to_python(value: Value) -> MontyObject {
    match value {
        Value::Null => MontyObject::None,
        Value::Bool(b) => MontyObject::Bool(b),
        Value::Number(n) => match n.as_i64() {
            Some(i) => MontyObject::Int(i),
            None => match n.as_u64() {
                Some(u) => MontyObject::BigInt(u.into()),
                None => MontyObject::Float(n.as_f64().unwrap_or(f64::NAN)),
            },
        },
        Value::String(s) => MontyObject::String(s),
        Value::Array(items) => MontyObject::List(items.into_iter().map(to_python).collect()),
        Value::Object(map) => MontyObject::Dict(DictPairs::from(
            map.into_iter().map(|(k, v)| (MontyObject::String(k), to_python(v))).collect::<Vec<_>>(),
        )),
    }
}

/// The script's final value as JSON. Whatever JSON cannot hold is given as text: dict keys other than strings
/// by their `repr`, floats that are not finite, and objects (a function, a class) by their `repr`.
pub fn to_result(object: MontyObject) -> Value {
    match object {
        MontyObject::None => Value::Null,
        MontyObject::Bool(b) => Value::Bool(b),
        MontyObject::Int(i) => Value::from(i),
        MontyObject::BigInt(i) => {
            i.to_string().parse::<Number>().map_or_else(|_| Value::String(i.to_string()), Value::Number)
        }
        MontyObject::Float(f) => Number::from_f64(f).map_or_else(|| Value::String(f.to_string()), Value::Number),
        MontyObject::String(s) | MontyObject::Path(s) => Value::String(s),
        MontyObject::List(items)
        | MontyObject::Tuple(items)
        | MontyObject::Set(items)
        | MontyObject::FrozenSet(items) => Value::Array(items.into_iter().map(to_result).collect()),
        MontyObject::NamedTuple { values, .. } => Value::Array(values.into_iter().map(to_result).collect()),
        MontyObject::Dict(pairs) => Value::Object(
            pairs
                .into_iter()
                .map(|(key, value)| {
                    let key = match key {
                        MontyObject::String(key) => key,
                        other => other.py_repr(),
                    };
                    (key, to_result(value))
                })
                .collect(),
        ),
        MontyObject::Date(_) | MontyObject::DateTime(_) | MontyObject::Time(_) | MontyObject::TimeDelta(_) => {
            Value::String(object.to_string())
        }
        other => Value::String(other.py_repr()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn json_round_trips_through_python_values() {
        let value = json!({"a": [1, 2.5, "x", null, true], "b": {"c": 18446744073709551615u64}});
        assert_eq!(to_result(to_python(value.clone())), value);
        assert_eq!(to_argument(to_python(value.clone())), Ok(value));
        let bad = MontyObject::Dict(DictPairs::from(vec![(MontyObject::Int(1), MontyObject::None)]));
        assert!(to_argument(bad.clone()).is_err());
        assert_eq!(to_result(bad), json!({"1": null}));
    }
}
