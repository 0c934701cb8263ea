<?php

namespace Drover\Control;

/**
 * The control socket (or its state directory) exists but this user may not use it: a master may
 * well be running. Never reported as "not running".
 */
final class PermissionDenied extends \RuntimeException
{
}
