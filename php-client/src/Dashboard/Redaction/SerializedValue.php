<?php

namespace Drover\Dashboard\Redaction;

use Drover\Dashboard\Redaction;

/**
 * Serialized data as the console may show it, read by scanning PHP's serialize() grammar — never
 * unserialize(): no class of the application is loaded or woken. The values of named keys and
 * properties are replaced, each nested string goes back through the redaction of strings (a
 * chain's later jobs are serialized strings inside the command), a closure is shown as a closure,
 * custom serialization (`C:`) is read when it is itself serialized data, and anything that cannot
 * be read — malformed, truncated, nested too deep — is not shown at all.
 */
final class SerializedValue
{
    /**
     * @param \Closure(string, int): string $strings how a nested string value is shown (Redaction::string)
     */
    public function __construct(private Names $names, private \Closure $strings)
    {
    }

    /**
     * A serialized value with the values of named keys and properties replaced and its nested
     * values shown safely — by scanning its grammar, never unserialize(). One it cannot read is
     * not shown at all: a secret in it could not be found to hide.
     */
    public function read(string $value, int $depth = 0): string
    {
        $pos = 0;
        try {
            $out = $this->value($value, $pos, $depth);
        } catch (\UnexpectedValueException) {
            return Redaction::UNREADABLE;
        }
        return $pos === strlen($value) ? $out : Redaction::UNREADABLE;
    }

    /** A string as serialize() writes it. */
    public static function string(string $text): string
    {
        return 's:' . strlen($text) . ':"' . $text . '";';
    }

    /** One value at $pos, copied (with redactions) and $pos moved past it. */
    private function value(string $s, int &$pos, int $depth): string
    {
        if ($depth > Redaction::MAX_DEPTH) {
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
                $shown = ($this->strings)($text, $depth + 1);
                return $shown === $text ? substr($s, $start, $pos - $start) : self::string($shown);
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
                    return Redaction::isClosure($class) ? self::string(Redaction::CLOSURE) : $this->custom($class, $inner, $depth);
                }
                $members = $this->members($s, $pos, $count, $depth);
                return Redaction::isClosure($class) ? self::string(Redaction::CLOSURE) : $head . $members . '}';
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
            return self::string(Redaction::UNREADABLE);
        }
        if ($pos !== strlen($inner)) {
            return self::string(Redaction::UNREADABLE);
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
            $out .= $key !== null && $this->names->named($key) ? self::string(Redaction::MARK) : $value;
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
}
