<?php

namespace Drover\Control;

/** No master answers on the control socket. */
final class NotRunning extends \RuntimeException
{
}
