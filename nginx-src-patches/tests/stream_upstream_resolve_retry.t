#!/usr/bin/perl

# (C) generation-retry developers

# Tests for re-resolvable stream upstream servers: a session whose
# connect failed after the peer list changed is proxied to a current
# peer, not closed with "no live upstreams" (nginx/nginx#1656).

###############################################################################

use warnings;
use strict;

use Test::More;

use IO::Select;

BEGIN { use FindBin; chdir($FindBin::Bin); }

use lib 'lib';
use Test::Nginx;

###############################################################################

select STDERR; $| = 1;
select STDOUT; $| = 1;

plan(skip_all => 'win32') if $^O eq 'MSWin32';
plan(skip_all => 'linux only: a full accept queue drops a SYN')
	if $^O ne 'linux';
plan(skip_all => '127.0.0.2 to 127.0.0.4 local addresses required')
	unless defined IO::Socket::INET->new( LocalAddr => '127.0.0.2' )
	and defined IO::Socket::INET->new( LocalAddr => '127.0.0.3' )
	and defined IO::Socket::INET->new( LocalAddr => '127.0.0.4' );

my $t = Test::Nginx->new()->has(qw/stream stream_upstream_zone/);

$t->write_file_expand('nginx.conf', <<'EOF');

%%TEST_GLOBALS%%

daemon off;

error_log %%TESTDIR%%/session.log info;

events {
}

stream {
    %%TEST_GLOBALS_STREAM%%

    log_format u $upstream_addr;

    upstream u {
        zone z 1m;
        server example.net:%%PORT_8081%% resolve;
    }

    resolver 127.0.0.1:%%PORT_8982_UDP%% valid=1s;
    resolver_timeout 1s;

    server {
        listen      127.0.0.1:8080;
        proxy_pass  u;
        proxy_connect_timeout 10s;
        access_log  %%TESTDIR%%/u.log u;
    }
}

EOF

# a control port, known to the daemon forked below

port(8083);

my $p = port(8081);

$t->run_daemon(\&dns_daemon, $t)->waitforfile($t->testdir . '/' . port(8982));
$t->run_daemon(\&new_daemon);
$t->waitforsocket("127.0.0.2:$p") and $t->waitforsocket("127.0.0.4:$p");

# the old addresses: listeners of this process only (made after the
# daemons are forked, so that closing them here resets connections),
# answered by it, and later with a full accept queue, so that nginx's
# connect waits

my %old = map { $_ => IO::Socket::INET->new(
	Proto => 'tcp',
	LocalAddr => "$_:$p",
	Listen => 1,
	Reuse => 1
) || die "Can't create listening socket: $!\n" } ('127.0.0.1', '127.0.0.3');

$t->try_run('no resolve in upstream server')->plan(4);

###############################################################################

# two addresses before and after the change: a session has a second
# try, and the list it is retried on is not a single peer

update_name('127.0.0.1 127.0.0.3');
is(probe_old(), 'old', 'resolved');

# the old addresses stop accepting: each accept queue is filled

my @fill = map { my $a = $_; map { IO::Socket::INET->new("$a:$p")
	|| die "Can't connect: $!\n" } (1 .. 2) } keys %old;

# the session's connect waits while the name moves to 127.0.0.2 and
# 127.0.0.4; its balancer state was created when nginx logged the session

my $s = IO::Socket::INET->new('127.0.0.1:' . port(8080))
	or die "Can't connect to nginx: $!\n";
wait_log($t, qr/client 127.0.0.1:${\ $s->sockport()} connected to 127.0.0.1:/);

update_name('127.0.0.2 127.0.0.4');
is(probe_new(), 'new', 'changed');

# the old listeners close: nginx's next SYN meets a reset, the connect
# fails, and the session is retried

close $_ for @fill, values %old;

is(read_line($s), 'new', 'retried after the change');

$t->stop();

like($t->read_file('u.log'), qr/^127.0.0.[13]:$p, 127.0.0.[24]:$p$/m,
	'retried on a new address');

###############################################################################

sub read_line {
	my ($s) = @_;
	my $line = '';

	eval {
		local $SIG{ALRM} = sub { die "timeout\n" };
		alarm(15);
		$line = <$s> // '';
		alarm(0);
	};
	alarm(0);

	chomp $line;
	return $line;
}

# sessions until one reaches an old address: accepted and answered here
# (until the name is resolved, nginx closes them: no live upstreams)

sub probe_old {
	for (1 .. 50) {
		my $s = IO::Socket::INET->new('127.0.0.1:' . port(8080))
			or die "Can't connect to nginx: $!\n";
		my $sel = IO::Select->new($s, values %old);

		for my $fh ($sel->can_read(5)) {
			next if $fh == $s;
			my $c = $fh->accept() or next;
			print $c "old\n";
			close $c;
			return read_line($s);
		}

		close $s;
		select undef, undef, undef, 0.1;
	}

	return '';
}

# sessions until one reaches a new address

sub probe_new {
	for (1 .. 50) {
		my $s = IO::Socket::INET->new('127.0.0.1:' . port(8080))
			or die "Can't connect to nginx: $!\n";
		my $line = read_line($s);
		return $line if $line eq 'new';
		select undef, undef, undef, 0.1;
	}

	return '';
}

sub wait_log {
	my ($t, $re) = @_;

	for (1 .. 50) {
		return if $t->read_file('session.log') =~ $re;
		select undef, undef, undef, 0.1;
	}

	die "no $re in session.log\n";
}

sub update_name {
	my ($addr) = @_;

	my $s = IO::Socket::INET->new(
		Proto => 'tcp',
		PeerAddr => '127.0.0.1:' . port(8083)
	)
		or die "Can't connect to control port: $!\n";

	print $s "GET / HTTP/1.0\nX-A: $addr\n\n";
	local $/;
	<$s>;
	close $s;
}

###############################################################################

# the new addresses answer every session

sub new_daemon {
	my @listen = map { IO::Socket::INET->new(
		Proto => 'tcp',
		LocalAddr => "$_:" . port(8081),
		Listen => 5,
		Reuse => 1
	) || die "Can't create listening socket: $!\n" }
		('127.0.0.2', '127.0.0.4');

	local $SIG{PIPE} = 'IGNORE';

	my $sel = IO::Select->new(@listen);

	while (my @ready = $sel->can_read) {
		foreach my $fh (@ready) {
			my $client = $fh->accept() or next;
			print $client "new\n";
			close $client;
		}
	}
}

###############################################################################

sub reply_handler {
	my ($recv_data, $addr) = @_;

	my (@name, @rdata);

	use constant NOERROR	=> 0;
	use constant A		=> 1;
	use constant IN		=> 1;

	my ($hdr, $rcode, $ttl) = (0x8180, NOERROR, 1);

	# decode name

	my ($len, $offset) = (undef, 12);
	while (1) {
		$len = unpack("\@$offset C", $recv_data);
		last if $len == 0;
		$offset++;
		push @name, unpack("\@$offset A$len", $recv_data);
		$offset += $len;
	}

	$offset -= 1;
	my ($id, $type, $class) = unpack("n x$offset n2", $recv_data);
	my $name = join('.', @name);

	if ($name eq 'example.net' && $type == A && $addr) {
		map { push @rdata, pack('n3N nC4', 0xc00c, A, IN, $ttl, 4,
			split(/\./, $_)) } split(/ /, $addr);
	}

	$len = @name;
	pack("n6 (C/a*)$len x n2", $id, $hdr | $rcode, 1, scalar @rdata,
		0, 0, @name, $type, $class) . join('', @rdata);
}

sub dns_daemon {
	my ($t) = @_;
	my ($data, $recv_data, $addr);

	my $socket = IO::Socket::INET->new(
		LocalAddr => '127.0.0.1',
		LocalPort => port(8982),
		Proto => 'udp',
	)
		or die "Can't create listening socket: $!\n";

	my $control = IO::Socket::INET->new(
		Proto => 'tcp',
		LocalHost => "127.0.0.1:" . port(8083),
		Listen => 5,
		Reuse => 1
	)
		or die "Can't create listening socket: $!\n";

	my $sel = IO::Select->new($socket, $control);

	local $SIG{PIPE} = 'IGNORE';

	# signal we are ready

	open my $fh, '>', $t->testdir() . '/' . port(8982);
	close $fh;

	while (my @ready = $sel->can_read) {
		foreach my $fh (@ready) {
			if ($control == $fh) {
				my $client = $fh->accept() or next;
				my $headers = '';
				while (<$client>) {
					$headers .= $_;
					last if (/^\x0d?\x0a?$/);
				}
				$addr = $1 if $headers =~ /X-A: (.*?)\x0d?$/m;
				print $client "HTTP/1.1 200 OK\r\n"
					. "Connection: close\r\n\r\n";
				$client->close();

			} elsif ($socket == $fh) {
				$fh->recv($recv_data, 65536);
				$data = reply_handler($recv_data, $addr);
				$fh->send($data);
			}
		}
	}
}

###############################################################################
