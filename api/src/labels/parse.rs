//! The selector-string grammar: a port of apimachinery's `selector.go` lexer and recursive-descent
//! parser (`Lexer`, `Parser`, `ParserContext`), token for token, with its error texts word for word.
//!
//! The lexer works on bytes as upstream does: only space, tab, CR and LF are whitespace, identifiers
//! run to the next special character (`= ! ( ) , > <`), and a NUL byte reads like the end of the input.
//! Every cut is at an ASCII byte, so literals are always valid `&str` slices of the input.

use super::{key_error, new_requirement, Operator, Requirement, SelectorError};

/// The lexer's tokens (`selector.go`'s `Token`; its `ErrorToken` cannot occur: every special
/// character is a token on its own).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Token {
    EndOfString,
    ClosedPar,
    Comma,
    DoesNotExist,
    DoubleEquals,
    Equals,
    GreaterThan,
    Identifier,
    In,
    LessThan,
    NotEquals,
    NotIn,
    OpenPar,
}

/// `string2token`, for the special-symbol tokens.
fn special_token(s: &str) -> Option<Token> {
    Some(match s {
        ")" => Token::ClosedPar,
        "," => Token::Comma,
        "!" => Token::DoesNotExist,
        "==" => Token::DoubleEquals,
        "=" => Token::Equals,
        ">" => Token::GreaterThan,
        "<" => Token::LessThan,
        "!=" => Token::NotEquals,
        "(" => Token::OpenPar,
        _ => return None,
    })
}

/// `isWhitespace`: only these four bytes.
fn is_whitespace(c: u8) -> bool {
    matches!(c, b' ' | b'\t' | b'\r' | b'\n')
}

fn is_special(c: u8) -> bool {
    matches!(c, b'=' | b'!' | b'(' | b')' | b',' | b'>' | b'<')
}

/// `selector.go`'s byte lexer. Like upstream, `read` returns 0 at the end, so a NUL byte ends a token
/// (and, where a token would start, the input).
struct Lexer<'a> {
    s: &'a str,
    pos: usize,
}

impl<'a> Lexer<'a> {
    fn read(&mut self) -> u8 {
        match self.s.as_bytes().get(self.pos) {
            Some(&c) => {
                self.pos += 1;
                c
            }
            None => 0,
        }
    }

    fn unread(&mut self) {
        self.pos = self.pos.saturating_sub(1);
    }

    /// The text between two byte positions; every cut is at an ASCII byte, so this never fails.
    fn text(&self, from: usize, to: usize) -> &'a str {
        self.s.get(from..to).unwrap_or("")
    }

    /// `scanIDOrKeyword`.
    fn id_or_keyword(&mut self) -> (Token, &'a str) {
        let start = self.pos;
        let end = loop {
            let before = self.pos;
            match self.read() {
                0 => break before,
                c if is_special(c) || is_whitespace(c) => {
                    self.unread();
                    break before;
                }
                _ => {}
            }
        };
        let lit = self.text(start, end);
        let tok = match lit {
            "in" => Token::In,
            "notin" => Token::NotIn,
            _ => Token::Identifier,
        };
        (tok, lit)
    }

    /// `scanSpecialSymbol`: the longest run of special characters that is a token.
    fn special_symbol(&mut self) -> (Token, &'a str) {
        let start = self.pos;
        let mut last: Option<(Token, usize)> = None;
        loop {
            match self.read() {
                0 => break,
                c if is_special(c) => match special_token(self.text(start, self.pos)) {
                    Some(tok) => last = Some((tok, self.pos)),
                    None if last.is_some() => {
                        self.unread();
                        break;
                    }
                    None => {}
                },
                _ => {
                    self.unread();
                    break;
                }
            }
        }
        match last {
            Some((tok, end)) => (tok, self.text(start, end)),
            // Unreachable (every special character is a token); treated as the end of the input.
            None => (Token::EndOfString, ""),
        }
    }

    /// `Lex`.
    fn lex(&mut self) -> (Token, &'a str) {
        let mut c = self.read();
        while is_whitespace(c) {
            c = self.read();
        }
        match c {
            0 => (Token::EndOfString, ""),
            c if is_special(c) => {
                self.unread();
                self.special_symbol()
            }
            _ => {
                self.unread();
                self.id_or_keyword()
            }
        }
    }
}

/// Where the parser is: `in`/`notin` are operators only in `KeyAndOperator`, identifiers in `Values`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Context {
    KeyAndOperator,
    Values,
}

/// `selector.go`'s `Parser`; its error texts are upstream's, word for word.
pub(super) struct Parser<'a> {
    items: Vec<(Token, &'a str)>,
    position: usize,
}

impl<'a> Parser<'a> {
    pub(super) fn new(s: &'a str) -> Self {
        let mut lexer = Lexer { s, pos: 0 };
        let mut items = Vec::new();
        loop {
            let item = lexer.lex();
            items.push(item);
            if item.0 == Token::EndOfString {
                break;
            }
        }
        Parser { items, position: 0 }
    }

    fn lookahead(&self, ctx: Context) -> (Token, &'a str) {
        let (tok, lit) = self
            .items
            .get(self.position)
            .copied()
            .unwrap_or((Token::EndOfString, ""));
        match tok {
            Token::In | Token::NotIn if ctx == Context::Values => (Token::Identifier, lit),
            _ => (tok, lit),
        }
    }

    fn consume(&mut self, ctx: Context) -> (Token, &'a str) {
        let item = self.lookahead(ctx);
        self.position += 1;
        item
    }

    /// `parse`: requirements separated by commas.
    pub(super) fn parse(&mut self) -> Result<Vec<Requirement>, SelectorError> {
        let mut reqs = Vec::new();
        loop {
            let (tok, lit) = self.lookahead(Context::Values);
            match tok {
                Token::Identifier | Token::DoesNotExist => {
                    reqs.push(self.requirement().map_err(SelectorError::Parse)?);
                    let (t, l) = self.consume(Context::Values);
                    match t {
                        Token::EndOfString => return Ok(reqs),
                        Token::Comma => {
                            let (t2, l2) = self.lookahead(Context::Values);
                            if t2 != Token::Identifier && t2 != Token::DoesNotExist {
                                return Err(SelectorError::Invalid(format!(
                                    "found '{l2}', expected: identifier after ','"
                                )));
                            }
                        }
                        _ => {
                            return Err(SelectorError::Invalid(format!(
                                "found '{l}', expected: ',' or 'end of string'"
                            )))
                        }
                    }
                }
                Token::EndOfString => return Ok(reqs),
                _ => {
                    return Err(SelectorError::Invalid(format!(
                        "found '{lit}', expected: !, identifier, or 'end of string'"
                    )))
                }
            }
        }
    }

    /// `parseRequirement`.
    fn requirement(&mut self) -> Result<Requirement, String> {
        let (key, op) = self.key_and_inferred_operator()?;
        if let Some(op) = op {
            return new_requirement(key, op, Vec::new());
        }
        let op = self.operator()?;
        let values = match op {
            Operator::In | Operator::NotIn => self.values()?,
            _ => self.exact_value()?,
        };
        new_requirement(key, op, values)
    }

    /// `parseKeyAndInferOperator`: `Exists`/`DoesNotExist` when no operator follows the key. A `!`
    /// key is `DoesNotExist` even when an operator follows (the caller then fails on it).
    fn key_and_inferred_operator(&mut self) -> Result<(&'a str, Option<Operator>), String> {
        let mut op = None;
        let (mut tok, mut lit) = self.consume(Context::Values);
        if tok == Token::DoesNotExist {
            op = Some(Operator::DoesNotExist);
            (tok, lit) = self.consume(Context::Values);
        }
        if tok != Token::Identifier {
            return Err(format!("found '{lit}', expected: identifier"));
        }
        // Upstream validates the key at the parser's nil path, which prints as `<nil>`.
        if let Some(e) = key_error(lit, "<nil>") {
            return Err(e);
        }
        let (next, _) = self.lookahead(Context::Values);
        if op.is_none() && matches!(next, Token::EndOfString | Token::Comma) {
            op = Some(Operator::Exists);
        }
        Ok((lit, op))
    }

    /// `parseOperator`.
    fn operator(&mut self) -> Result<Operator, String> {
        let (tok, lit) = self.consume(Context::KeyAndOperator);
        Ok(match tok {
            Token::In => Operator::In,
            Token::Equals => Operator::Equals,
            Token::DoubleEquals => Operator::DoubleEquals,
            Token::GreaterThan => Operator::GreaterThan,
            Token::LessThan => Operator::LessThan,
            Token::NotIn => Operator::NotIn,
            Token::NotEquals => Operator::NotEquals,
            _ => {
                return Err(format!(
                    "found '{lit}', expected: in, notin, =, ==, !=, gt, lt"
                ))
            }
        })
    }

    /// `parseValues`: `(a,b)`; `()` is the one empty value.
    fn values(&mut self) -> Result<Vec<String>, String> {
        let (tok, lit) = self.consume(Context::Values);
        if tok != Token::OpenPar {
            return Err(format!("found '{lit}' expected: '('"));
        }
        let (tok, lit) = self.lookahead(Context::Values);
        match tok {
            Token::Identifier | Token::Comma => {
                let set = self.identifiers_list()?;
                let (tok, _) = self.consume(Context::Values);
                if tok != Token::ClosedPar {
                    return Err(format!("found '{lit}', expected: ')'"));
                }
                Ok(set)
            }
            Token::ClosedPar => {
                self.consume(Context::Values);
                Ok(vec![String::new()])
            }
            _ => Err(format!("found '{lit}', expected: ',', ')' or identifier")),
        }
    }

    /// `parseIdentifiersList`: comma-separated, possibly empty, values; returned as a sorted set
    /// (`sets.String.List()`).
    fn identifiers_list(&mut self) -> Result<Vec<String>, String> {
        fn insert(set: &mut Vec<String>, v: &str) {
            if let Err(i) = set.binary_search_by(|x| x.as_str().cmp(v)) {
                set.insert(i, v.to_string());
            }
        }
        let mut set: Vec<String> = Vec::new();
        loop {
            let (tok, lit) = self.consume(Context::Values);
            match tok {
                Token::Identifier => {
                    insert(&mut set, lit);
                    let (tok2, lit2) = self.lookahead(Context::Values);
                    match tok2 {
                        Token::Comma => continue,
                        Token::ClosedPar => return Ok(set),
                        _ => return Err(format!("found '{lit2}', expected: ',' or ')'")),
                    }
                }
                Token::Comma => {
                    if set.is_empty() {
                        insert(&mut set, ""); // "(,"
                    }
                    let (tok2, _) = self.lookahead(Context::Values);
                    if tok2 == Token::ClosedPar {
                        insert(&mut set, ""); // ",)"
                        return Ok(set);
                    }
                    if tok2 == Token::Comma {
                        self.consume(Context::Values);
                        insert(&mut set, ""); // ",,"
                    }
                }
                _ => return Err(format!("found '{lit}', expected: ',', or identifier")),
            }
        }
    }

    /// `parseExactValue`: one value, possibly empty.
    fn exact_value(&mut self) -> Result<Vec<String>, String> {
        let (tok, _) = self.lookahead(Context::Values);
        if matches!(tok, Token::EndOfString | Token::Comma) {
            return Ok(vec![String::new()]);
        }
        let (tok, lit) = self.consume(Context::Values);
        if tok == Token::Identifier {
            return Ok(vec![lit.to_string()]);
        }
        Err(format!("found '{lit}', expected: identifier"))
    }
}
