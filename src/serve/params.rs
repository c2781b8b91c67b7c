//! The query parameters of an API request: the CLI's flag names (`base_volume` for
//! `--base-volume`), read with the library's parsers ([`crate::query::args`], the analytics
//! option types' `FromStr`), so a bad value is refused with the CLI's reason. A parameter the
//! route does not take, or one given twice, is refused rather than ignored.

use std::collections::BTreeMap;
use std::str::FromStr;

use chrono::{DateTime, Utc};

use super::access::ACCESS_TOKEN;
use super::bounds;
use crate::query::args;
use crate::{Error, Result};

/// The parameters of one request, by name.
#[derive(Debug)]
pub(super) struct Params {
    values: BTreeMap<String, String>,
}

fn refused(argument: &str, reason: impl Into<String>) -> Error {
    Error::InvalidArgument {
        argument: argument.into(),
        reason: reason.into(),
    }
}

impl Params {
    /// The parameters of `query` (the URL's query string), which may only be `allowed` (and
    /// the access token, which the access check reads).
    pub(super) fn parse(query: Option<&str>, allowed: &[&str]) -> Result<Params> {
        let mut values = BTreeMap::new();
        for (name, value) in url::form_urlencoded::parse(query.unwrap_or("").as_bytes()) {
            if name == ACCESS_TOKEN {
                continue;
            }
            if !allowed.contains(&name.as_ref()) {
                return Err(refused(
                    "parameter",
                    format!(
                        "{:?} is not a parameter of this route; its parameters are {}",
                        name,
                        allowed.join(", ")
                    ),
                ));
            }
            if values
                .insert(name.to_string(), value.into_owned())
                .is_some()
            {
                return Err(refused(
                    &name,
                    "given twice: give a parameter once (a list separates its values with commas)",
                ));
            }
        }
        Ok(Params { values })
    }

    /// The text of `name`, if given.
    pub(super) fn text(&self, name: &str) -> Option<&str> {
        self.values.get(name).map(String::as_str)
    }

    /// Whether `name` is given.
    pub(super) fn has(&self, name: &str) -> bool {
        self.values.contains_key(name)
    }

    /// Refuses `name` with any of `others` (what clap's `conflicts_with` does for the CLI).
    pub(super) fn conflicts(&self, name: &str, others: &[&str]) -> Result<()> {
        if !self.has(name) {
            return Ok(());
        }
        match others.iter().find(|o| self.has(o)) {
            Some(other) => Err(refused(name, format!("not with {other}"))),
            None => Ok(()),
        }
    }

    /// A value parsed by its type's own rule, whose refusal is the library's error as it is
    /// (a cost method, a fill, a mark).
    pub(super) fn value<T: FromStr<Err = Error>>(&self, name: &str) -> Result<Option<T>> {
        self.text(name).map(str::parse).transpose()
    }

    /// A number (or any value whose parser gives a reason): a refusal names the parameter.
    pub(super) fn number<T>(&self, name: &str) -> Result<Option<T>>
    where
        T: FromStr,
        T::Err: std::fmt::Display,
    {
        self.text(name)
            .map(|t| {
                t.parse::<T>()
                    .map_err(|e| refused(name, format!("{t:?}: {e}")))
            })
            .transpose()
    }

    /// A token, pool or wallet address ([`args::address`]).
    pub(super) fn address(&self, name: &str) -> Result<Option<String>> {
        self.text(name)
            .map(|t| args::address(t).map_err(|reason| refused(name, reason)))
            .transpose()
    }

    /// A comma-separated list of addresses, each by [`args::address`], at most
    /// [`bounds::MAX_TOKENS`].
    pub(super) fn addresses(&self, name: &str) -> Result<Option<Vec<String>>> {
        let Some(text) = self.text(name) else {
            return Ok(None);
        };
        let list = text
            .split(',')
            .map(|t| args::address(t).map_err(|reason| refused(name, reason)))
            .collect::<Result<Vec<_>>>()?;
        bounds::at_most(name, list.len(), bounds::MAX_TOKENS)?;
        Ok(Some(list))
    }

    /// An instant as RFC 3339 or Unix seconds ([`args::time`]).
    pub(super) fn time(&self, name: &str) -> Result<Option<DateTime<Utc>>> {
        self.text(name)
            .map(|t| args::time(t).map_err(|reason| refused(name, reason)))
            .transpose()
    }

    /// A switch: absent is off; empty, `true` or `1` is on; `false` or `0` is off.
    pub(super) fn flag(&self, name: &str) -> Result<bool> {
        match self.text(name) {
            None | Some("false" | "0") => Ok(false),
            Some("" | "true" | "1") => Ok(true),
            Some(other) => Err(refused(
                name,
                format!("{other:?}: expected true or false (or 1 or 0)"),
            )),
        }
    }

    /// The one of `names` given: none is refused naming them all, two naming both.
    pub(super) fn one_of<'n>(&self, names: &[&'n str]) -> Result<&'n str> {
        let given: Vec<&str> = names.iter().copied().filter(|n| self.has(n)).collect();
        match given.as_slice() {
            [one] => Ok(one),
            [] => Err(refused(
                names[0],
                format!("give one of {}", names.join(", ")),
            )),
            [first, second, ..] => Err(refused(first, format!("not with {second}"))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_repeated_and_bad_parameters_are_refused_by_name() {
        let p = |q: &str| Params::parse(Some(q), &["token", "interval", "strict"]);
        let unknown = p("token=A&colour=red").unwrap_err().to_string();
        assert!(
            unknown.contains("\"colour\" is not a parameter"),
            "{unknown}"
        );
        let twice = p("token=A&token=B").unwrap_err().to_string();
        assert!(twice.starts_with("invalid token: given twice"), "{twice}");
        let params = p("token=%20&interval=ten&strict=maybe&access_token=x").unwrap();
        let blank = params.address("token").unwrap_err().to_string();
        assert!(
            blank.starts_with("invalid token: an empty address"),
            "{blank}"
        );
        let number = params.number::<i64>("interval").unwrap_err().to_string();
        assert!(number.starts_with("invalid interval: \"ten\""), "{number}");
        assert!(params.flag("strict").is_err());
        assert!(!params.has("access_token"));
    }
}
