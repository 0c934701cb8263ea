<?php

namespace Drover\Dashboard;

/**
 * A payload as the dashboard may show it (docs/dashboard.md, "Redaction"): the values of fields
 * named in `drover.dashboard.redact` replaced by "[redacted]" — keys of the payload's JSON at any
 * depth, and properties of the job's serialized command (public, protected or private), read
 * without unserializing it (no class of the application is loaded or woken) — and a
 * ShouldBeEncrypted job's command shown as encrypted, never decrypted. Names are matched
 * case-insensitively. A payload that cannot be read is shown redacted as text where a field's
 * name is followed by its value in JSON.
 */
final class Redaction
{
    public const MARK = '[redacted]';

    /** What the console shows of a ShouldBeEncrypted job's command. */
    public const ENCRYPTED = '[encrypted (ShouldBeEncrypted): not decrypted for display]';

    /** @param list<string> $fields */
    public function __construct(private array $fields)
    {
        $this->fields = array_map('strtolower', array_values(array_filter($fields, 'is_string')));
    }

    /** The fields redacted where config/drover.php (an older published one) names none. */
    public const DEFAULTS = ['password', 'password_confirmation', 'secret', 'token', 'api_key', 'authorization', 'card_number', 'cvv'];

    public static function fromConfig(): self
    {
        return new self((array) config('drover.dashboard.redact', self::DEFAULTS));
    }

    /** The payload to show, pretty-printed. */
    public function show(?array $payload, string $raw): string
    {
        if ($payload === null) {
            return $this->text($raw);
        }
        return (string) json_encode($this->payload($payload), JSON_PRETTY_PRINT | JSON_UNESCAPED_SLASHES | JSON_UNESCAPED_UNICODE | JSON_INVALID_UTF8_SUBSTITUTE);
    }

    /** A decoded payload with its named fields redacted and its command shown safely. */
    public function payload(array $payload): array
    {
        $out = $this->array($payload);
        $command = $payload['data']['command'] ?? null;
        if (is_string($command) && isset($out['data']) && is_array($out['data']) && array_key_exists('command', $out['data']) && $out['data']['command'] !== self::MARK) {
            $out['data']['command'] = self::encrypted($command) ? self::ENCRYPTED : $this->serialized($command);
        }
        return $out;
    }

    private function array(array $values): array
    {
        $out = [];
        foreach ($values as $key => $value) {
            if (is_string($key) && $this->named($key)) {
                $out[$key] = self::MARK;
            } else {
                $out[$key] = is_array($value) ? $this->array($value) : $value;
            }
        }
        return $out;
    }

    private function named(string $name): bool
    {
        // A protected or private property's name in serialize(): "\0*\0name", "\0Class\0name".
        $pos = strrpos($name, "\0");
        $bare = $pos === false ? $name : substr($name, $pos + 1);
        return in_array(strtolower($bare), $this->fields, true);
    }

    /** Laravel's encrypter output: base64 of JSON holding iv, value and mac. */
    public static function encrypted(string $command): bool
    {
        if (str_starts_with($command, 'O:') || str_starts_with($command, 'a:')) {
            return false;
        }
        $decoded = json_decode((string) base64_decode($command, true), true);
        return is_array($decoded) && isset($decoded['iv'], $decoded['value'], $decoded['mac']);
    }

    /** What is shown of a serialized command this scanner cannot read: nothing of it. */
    public const UNREADABLE = '[a serialized command this page cannot read safely: not shown]';

    /**
     * A serialized value with the values of named keys and properties replaced — by scanning its
     * grammar, never unserialize(). One it cannot read is not shown at all: a secret in it could
     * not be found to hide.
     */
    public function serialized(string $value): string
    {
        if ($this->fields === []) {
            return $value;
        }
        $pos = 0;
        try {
            $out = $this->value($value, $pos, 0);
        } catch (\UnexpectedValueException) {
            return self::UNREADABLE;
        }
        return $pos === strlen($value) ? $out : self::UNREADABLE;
    }

    /** One value at $pos, copied (with redactions) and $pos moved past it. */
    private function value(string $s, int &$pos, int $depth): string
    {
        if ($depth > 64) {
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
                if ($end === false) {
                    throw new \UnexpectedValueException('unterminated');
                }
                $pos = $end + 1;
                return substr($s, $start, $pos - $start);
            case 's':
                $this->string($s, $pos);
                return substr($s, $start, $pos - $start);
            case 'E':
                // An enum case: E:N:"Class:Case"; — read as a string is, shown as it is.
                $pos += 2;
                $this->string($s, $pos, false);
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
                $this->string($s, $pos, false);
                $this->expect($s, $pos, ':');
                $count = $this->number($s, $pos, ':');
                $this->expect($s, $pos, '{');
                if ($type === 'C') {
                    // Custom serialization: $count bytes of the class's own format, shown as is.
                    $pos += $count;
                    $this->expect($s, $pos, '}');
                    return substr($s, $start, $pos - $start);
                }
                return substr($s, $start, $pos - $start) . $this->members($s, $pos, $count, $depth) . '}';
        }
        throw new \UnexpectedValueException('unknown type');
    }

    /** $count key => value pairs and the closing brace; values of named keys redacted. */
    private function members(string $s, int &$pos, int $count, int $depth): string
    {
        $out = '';
        for ($i = 0; $i < $count; $i++) {
            $keyStart = $pos;
            $key = ($s[$pos] ?? '') === 's' ? $this->string($s, $pos) : null;
            if ($key === null) {
                $this->value($s, $pos, $depth + 1);
            }
            $out .= substr($s, $keyStart, $pos - $keyStart);
            $value = $this->value($s, $pos, $depth + 1);
            $out .= $key !== null && $this->named($key) ? 's:' . strlen(self::MARK) . ':"' . self::MARK . '";' : $value;
        }
        $this->expect($s, $pos, '}');
        return $out;
    }

    /** s:N:"…"; (or, for a class name, N:"…") at $pos: its text, $pos past it. */
    private function string(string $s, int &$pos, bool $tagged = true): string
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

    /** Text that could not be read: each named field's value after `"name":` or `name";` hidden. */
    public function text(string $raw): string
    {
        foreach ($this->fields as $field) {
            $quoted = preg_quote($field, '/');
            $raw = (string) preg_replace('/("' . $quoted . '"\s*:\s*)("(?:[^"\\\\]|\\\\.)*"|[^,}\]\s]+)/i', '$1"' . self::MARK . '"', $raw);
            $raw = (string) preg_replace('/(' . $quoted . '";s:)\d+:"[^"]*";/i', '${1}' . strlen(self::MARK) . ':"' . self::MARK . '";', $raw);
        }
        return $raw;
    }
}
