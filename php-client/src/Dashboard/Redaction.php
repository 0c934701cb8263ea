<?php

namespace Drover\Dashboard;

/**
 * What the console may show of what jobs carry (docs/dashboard.md, "Redaction"): the rules, in one
 * place, as pure functions — and `row()`, the one entry point every page's rows go through before
 * a view sees them (payloads, exceptions, notes, outputs, outcomes, searches).
 *
 * - **Names.** A value whose name matches a rule is "[redacted]": keys of a payload's JSON and
 *   properties of a serialized command (public, protected or private) at any depth. A rule with
 *   `*` is a pattern (`*token*`, `*_key`); one without is a name, matched exactly. Both
 *   case-insensitively, `-` as `_`, and camelCase as snake_case (`apiKey` is `api_key`).
 *   DEFAULTS always apply; `drover.dashboard.redact` adds rules.
 * - **Nested values.** A string that is itself a serialized value (a chain's later jobs, a
 *   serialized string in a property) is read and redacted in turn; one that is JSON likewise; one
 *   that is Laravel's encrypter's output is shown as encrypted and never decrypted. A closure
 *   (Laravel's or Opis' SerializableClosure: a closure job, a chain's catch callbacks) is shown as
 *   a closure, its code and the variables it uses not shown. Custom serialization (`C:`) is read
 *   when it is itself serialized data, else not shown. Serialized data is read by scanning PHP's
 *   grammar, never by unserialize(): no class of the application is loaded or woken.
 * - **What cannot be read safely is not shown**: a truncated or malformed serialized value, one
 *   nested too deep, a text the rules could not be run on.
 * - **Free text** (exceptions and their traces, notes, a task's output, an action's outcome, and
 *   every string value of a payload): credentials in URLs (userinfo, and query parameters whose
 *   names match), `Bearer` and `Basic` credentials, and `name=value`, `name: value`,
 *   `"name": value`, `'name' => value`, `[name] => value` for names that match.
 * - **Searches** kept in the audit trail: the filters that take free text (`text`, `exception`)
 *   are kept as "[withheld]" (WITHHELD_FILTERS).
 */
final class Redaction
{
    public const MARK = '[redacted]';

    /** What the console shows of a ShouldBeEncrypted job's command (or any encrypter output). */
    public const ENCRYPTED = '[encrypted (ShouldBeEncrypted): not decrypted for display]';

    /** What is shown of serialized data this scanner cannot read: nothing of it. */
    public const UNREADABLE = '[a serialized value this page cannot read safely: not shown]';

    /** What is shown of a closure. */
    public const CLOSURE = '[a closure: its code and the variables it uses are not shown]';

    /** What is shown of a text the rules could not be run on (the regular expression engine gave up). */
    public const UNSCANNED = '[a text this page could not scan for secrets: not shown]';

    /** What is shown of a payload that is not JSON and holds serialized objects. */
    public const OPAQUE = '[a payload that is not JSON and holds serialized objects this page cannot read safely: not shown]';

    /** What the audit trail keeps of a search's free-text filter. */
    public const WITHHELD = '[withheld]';

    /** The search filters that take free text: never stored in the audit trail, never shown there. */
    public const WITHHELD_FILTERS = ['text', 'exception'];

    /**
     * The rules that always apply (config adds to them): patterns for what names a secret, and
     * the names the first releases listed.
     */
    public const DEFAULTS = [
        '*token*', '*secret*', '*password*', '*_key', 'authorization', 'cookie', 'set_cookie',
        'card_number', 'cvv', 'password_confirmation', 'api_key',
    ];

    /** The text fields of a row that `row()` redacts, wherever they come from. */
    public const TEXT_FIELDS = ['exception', 'failure', 'error', 'held_error', 'output_tail', 'reason', 'outcome', 'summary', 'problem'];

    /** Nesting (arrays, objects, serialized strings inside strings) beyond which nothing is shown. */
    private const MAX_DEPTH = 64;

    /** @var array<string, true> exact names, normalized */
    private array $exact = [];

    /** @var list<string> patterns as regular expressions over normalized names */
    private array $patterns = [];

    /**
     * @param list<string> $rules the names and patterns, all of them (fromConfig() adds DEFAULTS)
     */
    public function __construct(array $rules)
    {
        foreach ($rules as $rule) {
            if (!is_string($rule) || trim($rule) === '') {
                continue;
            }
            $rule = self::normalize(trim($rule));
            if (str_contains($rule, '*')) {
                $this->patterns[] = '/^' . str_replace('\*', '.*', preg_quote($rule, '/')) . '$/s';
            } else {
                $this->exact[$rule] = true;
            }
        }
    }

    /** @var array<string, self> the rules of each configuration seen, compiled once */
    private static array $compiled = [];

    /** DEFAULTS and the rules of `drover.dashboard.redact`. */
    public static function fromConfig(): self
    {
        $configured = function_exists('app') && app()->bound('config') ? config('drover.dashboard.redact', []) : [];
        $rules = array_merge(self::DEFAULTS, is_array($configured) ? array_values($configured) : []);
        $key = (string) json_encode($rules);
        if (count(self::$compiled) > 16) {
            self::$compiled = [];
        }
        return self::$compiled[$key] ??= new self($rules);
    }

    // ---------------------------------------------------------------- the entry point

    /**
     * A row as a page may show it: every text field redacted (TEXT_FIELDS), `exception_first_line`
     * taken from the redacted exception, and — with $payload — `payload` replaced by the payload
     * as shown (pretty, redacted) and `payload_array` by its redacted decoding (a chain's next
     * steps are read from it); without, both are removed (lists never hand a payload to a view).
     */
    public function row(object $row, bool $payload = false): object
    {
        foreach (self::TEXT_FIELDS as $field) {
            if (isset($row->{$field}) && is_string($row->{$field})) {
                $row->{$field} = $this->text($row->{$field});
            }
        }
        if (property_exists($row, 'exception') || property_exists($row, 'exception_first_line')) {
            $row->exception_first_line = strtok((string) ($row->exception ?? ''), "\n") ?: '';
        }
        if (property_exists($row, 'payload')) {
            if ($payload) {
                $decoded = is_string($row->payload) ? json_decode($row->payload, true) : null;
                $row->payload_array = is_array($decoded) ? $this->payload($decoded) : null;
                $row->payload = $this->show(is_array($decoded) ? $decoded : null, (string) $row->payload);
            } else {
                unset($row->payload, $row->payload_array);
            }
        }
        return $row;
    }

    // ---------------------------------------------------------------- names

    /** Whether a key or property named so is redacted. */
    public function named(string $name): bool
    {
        // A protected or private property's name in serialize(): "\0*\0name", "\0Class\0name".
        $pos = strrpos($name, "\0");
        $bare = $pos === false ? $name : substr($name, $pos + 1);
        foreach (array_unique([self::normalize($bare), self::snake($bare)]) as $candidate) {
            if (isset($this->exact[$candidate])) {
                return true;
            }
            foreach ($this->patterns as $pattern) {
                if (preg_match($pattern, $candidate) === 1) {
                    return true;
                }
            }
        }
        return false;
    }

    private static function normalize(string $name): string
    {
        return str_replace(['-', ' '], '_', strtolower($name));
    }

    private static function snake(string $name): string
    {
        return self::normalize((string) preg_replace('/([a-z0-9])([A-Z])/', '$1_$2', $name));
    }

    // ---------------------------------------------------------------- payloads

    /** The payload to show, pretty-printed: decoded JSON redacted, or text that is not JSON. */
    public function show(?array $payload, string $raw): string
    {
        if ($payload === null) {
            return $this->notJson($raw);
        }
        return (string) json_encode($this->payload($payload), JSON_PRETTY_PRINT | JSON_UNESCAPED_SLASHES | JSON_UNESCAPED_UNICODE | JSON_INVALID_UTF8_SUBSTITUTE);
    }

    /** A decoded payload with named keys redacted and every string value shown safely (its command too). */
    public function payload(array $payload): array
    {
        return $this->array($payload, 0);
    }

    private function array(array $values, int $depth): array
    {
        $out = [];
        foreach ($values as $key => $value) {
            if (is_string($key) && $this->named($key)) {
                $out[$key] = self::MARK;
            } elseif (is_array($value)) {
                $out[$key] = $depth >= self::MAX_DEPTH ? self::UNREADABLE : $this->array($value, $depth + 1);
            } elseif (is_string($value)) {
                $out[$key] = $this->string($value, $depth + 1);
            } else {
                $out[$key] = $value;
            }
        }
        return $out;
    }

    /**
     * A string value, wherever it is: encrypter output shown as encrypted; serialized data read
     * and redacted (UNREADABLE when it cannot be); JSON decoded, redacted and encoded again; any
     * other text through the text rules.
     */
    public function string(string $value, int $depth = 0): string
    {
        if ($depth > self::MAX_DEPTH) {
            return self::UNREADABLE;
        }
        if (self::encrypted($value)) {
            return self::ENCRYPTED;
        }
        if (self::looksSerialized($value)) {
            return $this->serialized($value, $depth);
        }
        $trimmed = ltrim($value);
        if ($trimmed !== '' && ($trimmed[0] === '{' || $trimmed[0] === '[')) {
            $decoded = json_decode($value, true);
            if (is_array($decoded)) {
                return (string) json_encode($this->array($decoded, $depth + 1), JSON_UNESCAPED_SLASHES | JSON_UNESCAPED_UNICODE | JSON_INVALID_UTF8_SUBSTITUTE);
            }
        }
        return $this->text($value);
    }

    /** Laravel's encrypter output: base64 of JSON holding iv, value and mac. */
    public static function encrypted(string $value): bool
    {
        if (strlen($value) < 40 || preg_match('/^[A-Za-z0-9+\/=]+$/', $value) !== 1) {
            return false;
        }
        $decoded = json_decode((string) base64_decode($value, true), true);
        return is_array($decoded) && isset($decoded['iv'], $decoded['value'], $decoded['mac']);
    }

    /** Whether a string starts as serialized data that could hold a secret (an object, an array, a string). */
    public static function looksSerialized(string $value): bool
    {
        return preg_match('/^(?:[OC]:\d+:"|a:\d+:\{|s:\d+:"|E:\d+:")/', $value) === 1;
    }

    /** Closures: Laravel's SerializableClosure (and its serializers), Opis' (Laravel 8 on old PHP). */
    public static function isClosure(string $class): bool
    {
        $class = ltrim($class, '\\');
        return str_starts_with($class, 'Laravel\\SerializableClosure\\')
            || str_starts_with($class, 'Opis\\Closure\\')
            || $class === 'Illuminate\\Queue\\SerializableClosure';
    }

    /**
     * A serialized value with the values of named keys and properties replaced and its nested
     * values shown safely — by scanning its grammar, never unserialize(). One it cannot read is
     * not shown at all: a secret in it could not be found to hide.
     */
    public function serialized(string $value, int $depth = 0): string
    {
        $pos = 0;
        try {
            $out = $this->value($value, $pos, $depth);
        } catch (\UnexpectedValueException) {
            return self::UNREADABLE;
        }
        return $pos === strlen($value) ? $out : self::UNREADABLE;
    }

    /** A string as serialize() writes it. */
    private static function serializedString(string $text): string
    {
        return 's:' . strlen($text) . ':"' . $text . '";';
    }

    /** One value at $pos, copied (with redactions) and $pos moved past it. */
    private function value(string $s, int &$pos, int $depth): string
    {
        if ($depth > self::MAX_DEPTH) {
            throw new \UnexpectedValueException('too deep');
        }
        $type = $s[$pos] ?? '';
        $start = $pos;
        switch ($type) {
            case 'N':
                $this->expect($s, $pos, 'N;');
                return 'N;';
            case 'b':
            case 'i':
            case 'd':
            case 'r':
            case 'R':
                $end = strpos($s, ';', $pos);
                if ($end === false || ($s[$pos + 1] ?? '') !== ':' || $end - $pos > 40) {
                    throw new \UnexpectedValueException('unterminated');
                }
                $pos = $end + 1;
                return substr($s, $start, $pos - $start);
            case 's':
                $text = $this->readString($s, $pos);
                $shown = $this->string($text, $depth + 1);
                return $shown === $text ? substr($s, $start, $pos - $start) : self::serializedString($shown);
            case 'E':
                // An enum case: E:N:"Class:Case"; — shown as it is.
                $pos += 2;
                $this->readString($s, $pos, false);
                $this->expect($s, $pos, ';');
                return substr($s, $start, $pos - $start);
            case 'a':
                $pos += 2;
                $count = $this->number($s, $pos, ':');
                $this->expect($s, $pos, '{');
                return substr($s, $start, $pos - $start) . $this->members($s, $pos, $count, $depth) . '}';
            case 'O':
            case 'C':
                $pos += 2;
                $class = $this->readString($s, $pos, false);
                $this->expect($s, $pos, ':');
                $count = $this->number($s, $pos, ':');
                $this->expect($s, $pos, '{');
                $head = substr($s, $start, $pos - $start);
                if ($type === 'C') {
                    // Custom serialization: $count bytes of the class's own format.
                    if ($pos + $count > strlen($s)) {
                        throw new \UnexpectedValueException('short custom serialization');
                    }
                    $inner = substr($s, $pos, $count);
                    $pos += $count;
                    $this->expect($s, $pos, '}');
                    return self::isClosure($class) ? self::serializedString(self::CLOSURE) : $this->custom($class, $inner, $depth);
                }
                $members = $this->members($s, $pos, $count, $depth);
                return self::isClosure($class) ? self::serializedString(self::CLOSURE) : $head . $members . '}';
        }
        throw new \UnexpectedValueException('unknown type');
    }

    /**
     * A class's own serialization (`C:`): shown when it is itself serialized data (read and
     * redacted like any), else not shown.
     */
    private function custom(string $class, string $inner, int $depth): string
    {
        $pos = 0;
        try {
            $shown = $this->value($inner, $pos, $depth + 1);
        } catch (\UnexpectedValueException) {
            return self::serializedString(self::UNREADABLE);
        }
        if ($pos !== strlen($inner)) {
            return self::serializedString(self::UNREADABLE);
        }
        return 'C:' . strlen($class) . ':"' . $class . '":' . strlen($shown) . ':{' . $shown . '}';
    }

    /** $count key => value pairs and the closing brace; values of named keys redacted. */
    private function members(string $s, int &$pos, int $count, int $depth): string
    {
        $out = '';
        for ($i = 0; $i < $count; $i++) {
            $keyStart = $pos;
            $key = ($s[$pos] ?? '') === 's' ? $this->readString($s, $pos) : null;
            if ($key === null) {
                if (($s[$pos] ?? '') !== 'i') {
                    throw new \UnexpectedValueException('a key is a string or an integer');
                }
                $this->value($s, $pos, $depth + 1);
            }
            $out .= substr($s, $keyStart, $pos - $keyStart);
            $value = $this->value($s, $pos, $depth + 1);
            $out .= $key !== null && $this->named($key) ? self::serializedString(self::MARK) : $value;
        }
        $this->expect($s, $pos, '}');
        return $out;
    }

    /** s:N:"…"; (or, for a class name, N:"…") at $pos: its text, $pos past it. */
    private function readString(string $s, int &$pos, bool $tagged = true): string
    {
        if ($tagged) {
            $this->expect($s, $pos, 's:');
        }
        $length = $this->number($s, $pos, ':');
        $this->expect($s, $pos, '"');
        if ($pos + $length > strlen($s)) {
            throw new \UnexpectedValueException('short string');
        }
        $text = substr($s, $pos, $length);
        $pos += $length;
        $this->expect($s, $pos, '"');
        if ($tagged) {
            $this->expect($s, $pos, ';');
        }
        return $text;
    }

    private function number(string $s, int &$pos, string $until): int
    {
        $end = strpos($s, $until, $pos);
        if ($end === false || $end === $pos || $end - $pos > 10 || !ctype_digit(substr($s, $pos, $end - $pos))) {
            throw new \UnexpectedValueException('number');
        }
        $n = (int) substr($s, $pos, $end - $pos);
        $pos = $end + 1;
        return $n;
    }

    private function expect(string $s, int &$pos, string $what): void
    {
        if (substr($s, $pos, strlen($what)) !== $what) {
            throw new \UnexpectedValueException("expected $what");
        }
        $pos += strlen($what);
    }

    /**
     * A payload that is not JSON: the text rules, and serialized `name";s:N:"value";` pairs; not
     * shown at all when it holds serialized objects, whose nested values and closures only the
     * scanner could find.
     */
    private function notJson(string $raw): string
    {
        if (preg_match('/[OC]:\d+:"/', $raw) === 1) {
            return self::OPAQUE;
        }
        return $this->text($raw);
    }

    // ---------------------------------------------------------------- free text

    /**
     * Text as a page may show it (an exception and its trace, a note, an output, an outcome, a
     * string value): credentials in URLs, Bearer and Basic credentials, and the values of named
     * fields in the forms text carries them in. Nothing of a text the rules could not be run on.
     */
    public function text(string $text): string
    {
        if ($text === '') {
            return $text;
        }
        $mark = self::MARK;
        $quoted = '"(?:[^"\\\\]|\\\\.)*+"|\'(?:[^\'\\\\]|\\\\.)*+\'';
        $steps = [
            // Authorization credentials, wherever they are.
            fn (string $t) => preg_replace('/\b(Bearer)\s+[A-Za-z0-9\-._~+\/]++=*+/', '$1 ' . $mark, $t),
            // Basic: base64 (a digit, +, / or =, or mixed case: not a word of prose).
            fn (string $t) => preg_replace('/\b(Basic)\s+(?=[A-Za-z0-9+\/]*+=|[A-Za-z]*+[0-9+\/]|[a-z]++[A-Z]|[A-Z][a-z]*+[A-Z])[A-Za-z0-9+\/]{8,}+=*+/', '$1 ' . $mark, $t),
            // A URL's userinfo (scheme://user:password@host), and one a stack trace cut short
            // ('https://user:pa...').
            fn (string $t) => preg_replace('~\b([a-z][a-z0-9+.\-]*+://)[^\s/?#@\'"<>]++@~i', '$1' . $mark . '@', $t),
            fn (string $t) => preg_replace('~\b([a-z][a-z0-9+.\-]*+://)[^\s/?#@\'"<>:]*+:[^\s/?#@\'"<>]*?\.\.\.(?=\')~i', '$1' . $mark . '...', $t),
            // JSON: "name": value (a string, an array of strings, or a bare value).
            fn (string $t) => $this->each(
                '/"([^"\\\\\r\n]{1,100}+)"\s*+:\s*+(' . $quoted . '|\[(?:[^\]"]|"(?:[^"\\\\]|\\\\.)*+")*+\]|[^,}\]\s]++)/',
                $t,
                [1],
                fn () => '"' . $mark . '"',
            ),
            // The same escaped inside a JSON string: \"name\":\"value\".
            fn (string $t) => $this->each(
                '/\\\\"([^"\\\\\r\n]{1,100}+)\\\\"\s*+:\s*+(\\\\"(?:(?!\\\\")[^\r\n])*+\\\\"|[^,}\]\s\\\\]++)/',
                $t,
                [1],
                fn () => '\\"' . $mark . '\\"',
            ),
            // PHP: 'name' => value (var_export, code), [name] => value (print_r: to the line's end).
            fn (string $t) => $this->each('/[\'"]([^\'"\r\n]{1,100}+)[\'"]\s*+=>\s*+(' . $quoted . '|[^\r\n,)\]]*+)/', $t, [1], fn () => "'" . $mark . "'"),
            fn (string $t) => $this->each('/\[([^\]\r\n]{1,100}+)\]\s*+=>\s*+([^\r\n]*+)/', $t, [1], fn () => $mark),
            // name=value: a query string, a form body, --option=value, NAME=value, name[sub]=value.
            fn (string $t) => $this->each(
                '/(?<![\w\[\]%])(([A-Za-z_][\w\-.]{0,99}+)(?:\[([\w\-]{0,100}+)\])?+(?:\[[\w\-]{0,100}+\])*+)\s*+=(?!>)\s*+(' . $quoted . '|[^\s&#,;\'"<>()\[\]{}]*+)/',
                $t,
                [1, 2, 3],
                fn () => $mark,
            ),
            // name: value — a header (Authorization, Cookie, X-Api-Key: to the line's end), or a
            // named field in prose or YAML (its first word).
            fn (string $t) => $this->each(
                '/(?<![\w\-"\'\\\\])([A-Za-z][\w\-]{0,99}+)[ \t]*+:[ \t]*+(?!\/\/)((?=[^\s])[^\r\n"\']*+)/',
                $t,
                [1],
                fn (array $m) => str_contains($m[1][0], '-') || in_array(strtolower($m[1][0]), ['authorization', 'cookie'], true)
                    ? $mark
                    : (string) preg_replace('/^[^\s,;]++/', $mark, $m[2][0]),
            ),
            // Serialized pairs in text that could not be read as a whole: name";s:N:"value";
            fn (string $t) => $this->each(
                '/s:\d++:"([^"]{1,100}+)";(s:\d++:"[^"]*+";|[idb]:[^;]{0,40}+;)/',
                $t,
                [1],
                fn () => self::serializedString($mark),
            ),
        ];
        foreach ($steps as $step) {
            $text = $step($text);
            if (!is_string($text)) {
                // The engine gave up (its backtracking or recursion limit): show nothing of it.
                return self::UNSCANNED;
            }
        }
        return $text;
    }

    /**
     * Each match of $pattern in $text, left to right: where one of the groups $names holds a
     * name that matches, its last group (the value) is replaced by $value(the match's groups);
     * where none does, the scan goes on right after the name, so that a value is scanned in turn
     * (a header's line may hold another). Null when the engine gives up.
     *
     * @param list<int> $names
     * @param callable(array): string $value
     */
    private function each(string $pattern, string $text, array $names, callable $value): ?string
    {
        $out = '';
        $at = 0;
        while (true) {
            $found = preg_match($pattern, $text, $m, PREG_OFFSET_CAPTURE, $at);
            if ($found === false) {
                return null;
            }
            if ($found === 0) {
                return $out . substr($text, $at);
            }
            $last = count($m) - 1;
            [$whole, $start] = $m[0];
            $valueAt = $m[$last][1];
            $named = false;
            foreach ($names as $group) {
                if (isset($m[$group]) && $m[$group][1] >= 0 && $m[$group][0] !== '' && $this->named($m[$group][0])) {
                    $named = true;
                    break;
                }
            }
            if ($named && $valueAt >= 0) {
                $out .= substr($text, $at, $valueAt - $at) . $value($m);
                $at = $start + strlen($whole);
            } else {
                // Past the name only; never stuck on an empty match.
                $next = max($valueAt >= 0 ? $valueAt : $start + strlen($whole), $start + 1);
                $out .= substr($text, $at, $next - $at);
                $at = $next;
            }
            if ($at >= strlen($text)) {
                return $out;
            }
        }
    }

    // ---------------------------------------------------------------- searches

    /**
     * A search's query as the audit trail keeps and shows it: its free-text filters (text,
     * exception) replaced by WITHHELD.
     *
     * @param array<string, mixed> $query
     * @return array<string, mixed>
     */
    public static function search(array $query): array
    {
        foreach (self::WITHHELD_FILTERS as $name) {
            if (isset($query[$name]) && $query[$name] !== '') {
                $query[$name] = self::WITHHELD;
            }
        }
        return $query;
    }

    /**
     * The free-text filters of a search, which the audit trail does not keep: what a bulk
     * action carries to its background job instead.
     *
     * @param array<string, mixed> $query
     * @return array<string, string>
     */
    public static function withheld(array $query): array
    {
        $withheld = [];
        foreach (self::WITHHELD_FILTERS as $name) {
            if (isset($query[$name]) && is_string($query[$name]) && $query[$name] !== '') {
                $withheld[$name] = $query[$name];
            }
        }
        return $withheld;
    }
}
