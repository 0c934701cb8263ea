<?php

namespace Drover\Workflow;

/**
 * A step's condition on the result a step it runs after recorded (`when: ['parse', 'rows', '>',
 * 1000]`): the node whose result is read, a path of keys into it, an operator and a value. The
 * node runs when it holds and is skipped when it does not.
 *
 * What holds is decided in the database (drover.wf_condition_holds,
 * broker/migrations/0016_workflows.sql) when the node is released; holds() here is the same rule
 * for the pure state machine (Graph), so both can be tested against the same cases:
 *
 * - the result is the node's first step's that recorded one (the lowest member); the path walks
 *   object keys and array indexes (an index may be negative, from the end);
 * - a missing result, a missing path and a result that is not JSON are false — but `!=` is true
 *   of a missing value (it is distinct from any value), and a result that is not JSON is false
 *   for every operator;
 * - `=` and `!=` compare JSON values as PostgreSQL's jsonb does (1 equals 1.0; objects whatever
 *   their keys' order); `>`, `>=`, `<`, `<=` compare two numbers, or two strings (by the
 *   database's collation there; byte order here, which is the C collation's), and are false for
 *   anything else;
 * - `exists` holds when the path leads to a value other than JSON null.
 */
final class Condition
{
    /** The operators drover.wf_condition_holds knows. */
    public const OPERATORS = ['=', '!=', '>', '>=', '<', '<=', 'exists'];

    /**
     * @param list<string> $path keys into the result, outermost first ([] for the whole result)
     * @param mixed $value the value compared with, as JSON decodes it (objects as \stdClass); null for `exists`
     */
    private function __construct(
        public readonly string $node,
        public readonly array $path,
        public readonly string $op,
        public readonly mixed $value,
    ) {
    }

    /**
     * The condition `when:` declares for step $step of workflow $workflow: [node, dotted path, op,
     * value] (`['parse', 'stats.rows', '>', 1000]`), or [node, dotted path, 'exists']. The path
     * may also be a list of keys (for a key with a dot in it), or '' for the whole result.
     *
     * @param array<int, mixed> $when
     * @throws InvalidWorkflow naming the workflow, the step and what to write instead
     */
    public static function declared(array $when, string $workflow, string $step): self
    {
        $where = "drover: workflow \"$workflow\": step \"$step\" has a condition (when:)";
        $when = array_values($when);
        $shape = "; write it as [step, 'dotted.path', operator, value], or [step, 'dotted.path', 'exists']";
        if (count($when) < 3 || count($when) > 4) {
            throw new InvalidWorkflow("$where of " . count($when) . " elements$shape");
        }
        [$node, $path, $op] = $when;
        if (!is_string($node) || $node === '') {
            throw new InvalidWorkflow("$where whose first element is not a step's name$shape");
        }
        if (!is_string($op) || !in_array($op, self::OPERATORS, true)) {
            throw new InvalidWorkflow("$where with the operator " . var_export($op, true) . '; use one of ' . implode(' ', self::OPERATORS));
        }
        if ($op === 'exists') {
            if (count($when) !== 3) {
                throw new InvalidWorkflow("$where with `exists` and a value; `exists` takes none: [step, 'dotted.path', 'exists']");
            }
            $value = null;
        } else {
            if (count($when) !== 4) {
                throw new InvalidWorkflow("$where with `$op` and no value$shape");
            }
            try {
                $value = json_decode(json_encode($when[3], JSON_THROW_ON_ERROR | JSON_PRESERVE_ZERO_FRACTION), false, 512, JSON_THROW_ON_ERROR);
            } catch (\JsonException $e) {
                throw new InvalidWorkflow("$where whose value cannot be written as JSON ({$e->getMessage()}); compare with a string, a number, a boolean, null or an array of those");
            }
        }
        if (is_string($path)) {
            $keys = $path === '' ? [] : explode('.', $path);
        } elseif (is_array($path) && array_is_list($path)) {
            $keys = array_map(fn ($k) => is_int($k) ? (string) $k : $k, $path);
        } else {
            throw new InvalidWorkflow("$where whose path is " . get_debug_type($path) . "; give a dotted path ('stats.rows'), a list of keys, or '' for the whole result");
        }
        foreach ($keys as $key) {
            if (!is_string($key) || $key === '') {
                throw new InvalidWorkflow("$where whose path has an empty or non-text key; give keys such as 'stats.rows' or ['stats', 'rows']");
            }
        }
        return new self($node, $keys, $op, $value);
    }

    /**
     * As drover.workflow_create takes it: {node, path, op, value}.
     *
     * @return array{node: string, path: list<string>, op: string, value: mixed}
     */
    public function toArray(): array
    {
        return ['node' => $this->node, 'path' => $this->path, 'op' => $this->op, 'value' => $this->value];
    }

    /**
     * Whether the condition holds of $result: the JSON text the node's first step recorded, or
     * null when none recorded one.
     */
    public function holds(?string $result): bool
    {
        if ($result === null) {
            $v = self::missing();
        } else {
            try {
                $decoded = json_decode($result, false, 512, JSON_THROW_ON_ERROR);
            } catch (\JsonException $e) {
                return false;
            }
            $v = self::at($decoded, $this->path);
        }
        $missing = $v === self::missing();
        return match (true) {
            $this->op === 'exists' => !$missing && $v !== null,
            $this->op === '!=' => $missing || !self::same($v, $this->value),
            $missing => false,
            $this->op === '=' => self::same($v, $this->value),
            self::isNumber($v) && self::isNumber($this->value) => self::ordered($v <=> $this->value),
            is_string($v) && is_string($this->value) => self::ordered(strcmp($v, $this->value)),
            default => false,
        };
    }

    /** Whether comparing gave what the operator asks for (`$cmp` as <=> gives it). */
    private function ordered(int $cmp): bool
    {
        return match ($this->op) {
            '>' => $cmp > 0,
            '>=' => $cmp >= 0,
            '<' => $cmp < 0,
            '<=' => $cmp <= 0,
        };
    }

    /** The value at $path in $value (jsonb's `#>`), or missing(). */
    private static function at(mixed $value, array $path): mixed
    {
        foreach ($path as $key) {
            if ($value instanceof \stdClass) {
                if (!property_exists($value, $key)) {
                    return self::missing();
                }
                $value = $value->{$key};
            } elseif (is_array($value) && preg_match('/^-?[0-9]{1,9}$/', $key) === 1) {
                $index = (int) $key;
                $index = $index < 0 ? count($value) + $index : $index;
                if (!array_key_exists($index, $value)) {
                    return self::missing();
                }
                $value = $value[$index];
            } else {
                return self::missing();
            }
        }
        return $value;
    }

    /** jsonb equality: numbers by value, arrays in order, objects by their keys whatever the order. */
    private static function same(mixed $a, mixed $b): bool
    {
        if (self::isNumber($a) && self::isNumber($b)) {
            return $a == $b;
        }
        if (is_array($a) && is_array($b)) {
            if (count($a) !== count($b)) {
                return false;
            }
            foreach ($a as $i => $item) {
                if (!self::same($item, $b[$i])) {
                    return false;
                }
            }
            return true;
        }
        if ($a instanceof \stdClass && $b instanceof \stdClass) {
            $a = get_object_vars($a);
            $b = get_object_vars($b);
            if (count($a) !== count($b)) {
                return false;
            }
            foreach ($a as $key => $item) {
                if (!array_key_exists($key, $b) || !self::same($item, $b[$key])) {
                    return false;
                }
            }
            return true;
        }
        return $a === $b;
    }

    private static function isNumber(mixed $v): bool
    {
        return is_int($v) || is_float($v);
    }

    /** What a missing result or path is: nothing JSON decodes to. */
    private static function missing(): object
    {
        static $missing = null;
        return $missing ??= new class () {
        };
    }
}
