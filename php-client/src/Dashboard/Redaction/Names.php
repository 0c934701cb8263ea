<?php

namespace Drover\Dashboard\Redaction;

/**
 * Which names hide their values (docs/dashboard.md, "Redaction"): a rule with `*` is a pattern
 * (`*token*`, `*_key`), one without is a name, matched exactly; both case-insensitively, `-` as
 * `_`, and camelCase as snake_case (`apiKey` is `api_key`). A protected or private property's
 * name as serialize() writes it (`\0*\0name`, `\0Class\0name`) is matched by its bare name.
 */
final class Names
{
    /** @var array<string, true> exact names, normalized */
    private array $exact = [];

    /** @var list<string> patterns as regular expressions over normalized names */
    private array $patterns = [];

    /** @param list<string> $rules the names and patterns, all of them */
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

    /** Whether a key or property named so is redacted. */
    public function named(string $name): bool
    {
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
}
