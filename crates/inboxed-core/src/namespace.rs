//! Where the inbox tables live: a schema and a table-name prefix, validated once and
//! substituted into the SQL templates when a store is built. Nothing else is ever interpolated
//! into SQL; every value travels as a bind parameter.

use crate::error::StoreError;

/// Longest accepted table prefix. PostgreSQL truncates identifiers at 63 bytes, and the
/// longest name built from the prefix (`<prefix>processed_messages_received_at_idx`) is 34
/// bytes longer than the prefix.
pub const MAX_PREFIX_BYTES: usize = 29;

/// A validated schema and table prefix.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Namespace {
    schema: String,
    prefix: String,
    /// Quote the schema with backticks (MySQL) instead of double quotes.
    backticks: bool,
}

impl Namespace {
    /// Validates both names: lowercase ASCII letters, digits and `_`, not starting with a digit.
    /// Lowercase only, so that the quoted name and the name a person types unquoted agree.
    ///
    /// # Errors
    /// [`StoreError::InvalidIdentifier`] naming the rule that was broken.
    pub fn new(schema: &str, prefix: &str) -> Result<Self, StoreError> {
        check(schema, 63, false)?;
        check(prefix, MAX_PREFIX_BYTES, true)?;
        Ok(Self {
            schema: schema.to_owned(),
            prefix: prefix.to_owned(),
            backticks: false,
        })
    }

    /// The same names, quoted for MySQL: with backticks, since a double quote opens a string
    /// there unless the session sets `ANSI_QUOTES`, which a store cannot impose on
    /// connections that also run the application's own SQL. MySQL templates write
    /// ``{{schema}}.`{{prefix}}name` ``.
    #[must_use]
    pub fn with_backticks(mut self) -> Self {
        self.backticks = true;
        self
    }

    /// The schema name, unquoted.
    #[must_use]
    pub fn schema(&self) -> &str {
        &self.schema
    }

    /// The table prefix.
    #[must_use]
    pub fn prefix(&self) -> &str {
        &self.prefix
    }

    /// Replaces `{{schema}}` with the quoted schema and `{{prefix}}` with the prefix (which is
    /// only ever used inside a quoted identifier in the templates).
    #[must_use]
    pub fn render(&self, template: &str) -> String {
        let q = if self.backticks { '`' } else { '"' };
        template
            .replace("{{schema}}", &format!("{q}{}{q}", self.schema))
            .replace("{{prefix}}", &self.prefix)
    }
}

fn check(name: &str, max: usize, may_be_empty: bool) -> Result<(), StoreError> {
    let fail = |reason| {
        Err(StoreError::InvalidIdentifier {
            name: name.to_owned(),
            reason,
        })
    };
    if name.is_empty() {
        return if may_be_empty {
            Ok(())
        } else {
            fail("it is empty")
        };
    }
    if name.len() > max {
        return fail("it is too long");
    }
    if name.as_bytes()[0].is_ascii_digit() {
        return fail("it starts with a digit");
    }
    if !name
        .bytes()
        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
    {
        return fail("only lowercase ASCII letters, digits and '_' are allowed");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_with_sql_metacharacters_are_refused() {
        for bad in ["", "a\"b", "x; drop table t", "A", "1a", "a-b", "ä"] {
            assert!(Namespace::new(bad, "p_").is_err(), "schema {bad:?}");
        }
        for bad in ["a\"", "x y", "p'", &"a".repeat(30)] {
            assert!(Namespace::new("public", bad).is_err(), "prefix {bad:?}");
        }
        let ns = Namespace::new("app_1", "").unwrap();
        assert_eq!(ns.render("{{schema}}.\"{{prefix}}t\""), "\"app_1\".\"t\"");
        let my = ns.with_backticks();
        assert_eq!(my.render("{{schema}}.`{{prefix}}t`"), "`app_1`.`t`");
    }
}
