<?php

namespace Drover\Protocol;

/** The master's end of the socket is gone: the master exited or closed it. */
final class ChannelClosed extends \RuntimeException
{
}
