<?php

namespace Drover\Dashboard;

use Drover\Dashboard\Redaction\FreeText;
use Drover\Dashboard\Redaction\Names;
use Drover\Dashboard\Redaction\SerializedValue;
use Drover\Dashboard\Redaction\WithheldFilters;

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
 *
 * The parts, under Redaction/: Names (which names hide their values), SerializedValue (the
 * serialize() grammar, scanned), FreeText (the text rules), WithheldFilters (searches in the
 * audit trail). This class is their one entry point.
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
    public const MAX_DEPTH = 64;

    /** Which names hide their values. */
    private Names $names;

    /** The scanner of serialized values, whose nested strings come back to string(). */
    private SerializedValue $serializedValues;

    /** The rules of free text. */
    private FreeText $freeText;

    /**
     * @param list<string> $rules the names and patterns, all of them (fromConfig() adds DEFAULTS)
     */
    public function __construct(array $rules)
    {
        $this->names = new Names($rules);
        $this->serializedValues = new SerializedValue($this->names, fn (string $text, int $depth): string => $this->string($text, $depth));
        $this->freeText = new FreeText($this->names);
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
        return $this->names->named($name);
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
     * values shown safely, by scanning its grammar (SerializedValue); one it cannot read is not
     * shown at all.
     */
    public function serialized(string $value, int $depth = 0): string
    {
        return $this->serializedValues->read($value, $depth);
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

    /** Text as a page may show it (FreeText). */
    public function text(string $text): string
    {
        return $this->freeText->redact($text);
    }

    // ---------------------------------------------------------------- searches

    /**
     * A search's query as the audit trail keeps and shows it (WithheldFilters).
     *
     * @param array<string, mixed> $query
     * @return array<string, mixed>
     */
    public static function search(array $query): array
    {
        return WithheldFilters::kept($query);
    }

    /**
     * The free-text filters of a search, carried to a bulk action's background job (WithheldFilters).
     *
     * @param array<string, mixed> $query
     * @return array<string, string>
     */
    public static function withheld(array $query): array
    {
        return WithheldFilters::withheld($query);
    }
}
