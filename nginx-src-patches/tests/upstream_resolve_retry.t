#!/usr/bin/perl

# (C) generation-retry developers

# Tests for re-resolvable upstream servers: a request retried after
# the peer list changed is sent to a current peer, not refused with
# "no live upstreams" (nginx/nginx#1656).

###############################################################################

use warnings;
use strict;

use Test::More;

use IO::Select;

BEGIN { use FindBin; chdir($FindBin::Bin); }

use lib 'lib';
use Test::Nginx qw/ :DEFAULT http_end /;

###############################################################################

select STDERR; $| = 1;
select STDOUT; $| = 1;

plan(skip_all => 'win32') if $^O eq 'MSWin32';
plan(skip_all => '127.0.0.2 to 127.0.0.4 local addresses required')
	unless defined IO::Socket::INET->new( LocalAddr => '127.0.0.2' )
	and defined IO::Socket::INET->new( LocalAddr => '127.0.0.3' )
	and defined IO::Socket::INET->new( LocalAddr => '127.0.0.4' );

my $t = Test::Nginx->new()->has(qw/http proxy upstream_zone/);

$t->write_file_expand('nginx.conf', <<'EOF');

%%TEST_GLOBALS%%

daemon off;

events {
}

http {
    %%TEST_GLOBALS_HTTP%%

    upstream u {
        zone z 1m;
        server example.net:%%PORT_8081%% resolve;
    }

    resolver 127.0.0.1:%%PORT_8982_UDP%% valid=1s;
    resolver_timeout 1s;

    server {
        listen       127.0.0.1:8080;
        server_name  localhost;

        location / {
            proxy_pass http://u;
            add_header X-IP $upstream_addr always;
        }
    }
}

EOF

# control ports, known to the daemons forked below

port(8083);
port(8085);

$t->run_daemon(\&dns_daemon, $t)->waitforfile($t->testdir . '/' . port(8982));
$t->run_daemon(\&http_daemon, $t)->waitforsocket('127.0.0.1:' . port(8085));
$t->try_run('no resolve in upstream server')->plan(4);

###############################################################################

my $p = port(8081);

# two addresses before and after the change: a request has a second
# try, and the list it is retried on is not a single peer (whose failure
# ends the tries)

update_name('127.0.0.1 127.0.0.3');
like(probe('127.0.0.[13]'), qr/X-IP: 127.0.0.[13]:$p/, 'resolved');

# the request's first attempt is held by the backend while the name
# moves to 127.0.0.2 and 127.0.0.4; once nginx proxies to the new
# addresses, the held connection is closed without a response, and the
# request is retried

my $s = http_get('/race', start => 1);
$t->waitforfile($t->testdir . '/held');

update_name('127.0.0.2 127.0.0.4');
like(probe('127.0.0.[24]'), qr/X-IP: 127.0.0.[24]:$p/, 'changed');

release();
my $r = http_end($s);

like($r, qr/^HTTP\/1.1 200 /, 'retried after the change');
like($r, qr/X-IP: 127.0.0.[13]:$p, 127.0.0.[24]:$p/,
	'retried on a new address');

###############################################################################

# the address nginx proxies to, asked until it is the one expected

sub probe {
	my ($addr) = @_;
	my $r;

	for (1 .. 50) {
		$r = http_get('/probe');
		last if $r =~ /X-IP: $addr:/;
		select undef, undef, undef, 0.1;
	}

	return $r;
}

sub control {
	my ($port, $request) = @_;

	my $s = IO::Socket::INET->new(
		Proto => 'tcp',
		PeerAddr => '127.0.0.1:' . port($port)
	)
		or die "Can't connect to control port: $!\n";

	return http($request, socket => $s);
}

sub update_name {
	my ($addr) = @_;

	control(8083, <<EOF);
GET / HTTP/1.0
X-A: $addr

EOF
}

sub release {
	control(8085, <<EOF);
GET /release HTTP/1.0

EOF
}

###############################################################################

# the old addresses, 127.0.0.1 and 127.0.0.3, hold /race until released;
# otherwise each address answers, the new ones, 127.0.0.2 and 127.0.0.4,
# everything

sub http_daemon {
	my ($t) = @_;
	my (@listen, $held);

	for my $addr ('127.0.0.1', '127.0.0.3', '127.0.0.2', '127.0.0.4') {
		push @listen, IO::Socket::INET->new(
			Proto => 'tcp',
			LocalAddr => "$addr:" . port(8081),
			Listen => 5,
			Reuse => 1
		)
			or die "Can't create listening socket: $!\n";
	}

	my $control = IO::Socket::INET->new(
		Proto => 'tcp',
		LocalAddr => '127.0.0.1:' . port(8085),
		Listen => 5,
		Reuse => 1
	)
		or die "Can't create listening socket: $!\n";

	local $SIG{PIPE} = 'IGNORE';

	my $sel = IO::Select->new(@listen, $control);

	while (my @ready = $sel->can_read) {
		foreach my $fh (@ready) {
			my $client = $fh->accept() or next;
			$client->autoflush(1);

			my $headers = '';
			while (<$client>) {
				$headers .= $_;
				last if (/^\x0d?\x0a?$/);
			}

			if ($fh == $control) {
				$held->close() if $held;
				undef $held;

			} elsif (($fh == $listen[0] || $fh == $listen[1])
				&& $headers =~ /^GET \/race /)
			{
				$held = $client;
				open my $f, '>', $t->testdir() . '/held';
				close $f;
				next;
			}

			print $client <<EOF;
HTTP/1.1 200 OK
Connection: close

OK
EOF
			$client->close();
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

	Test::Nginx::log_core('||', "DNS: $name $type " . ($addr // ''));

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
