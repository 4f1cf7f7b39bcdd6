# frozen_string_literal: true

# Starts memcached (the oracle) and memcrab for the Ruby client suites.
#
# Every server is a real process on a free loopback port, in its own process
# group, killed (SIGKILL to the group) when the test that started it ends and at
# exit whatever happens. Readiness is polled with connect() under a deadline,
# never a fixed sleep.
#
# Binaries: MEMCACHED_BIN (default: memcached on PATH, else /usr/bin/memcached)
# and MEMCRAB_BIN (default: ../../target/release/memcrab from this file).
# MEMCRAB_BIN=/usr/bin/memcached runs every suite against memcached alone.

require 'fileutils'
require 'open3'
require 'socket'
require 'tmpdir'

module Servers
  KINDS = %w[memcached memcrab].freeze
  READY_TIMEOUT_SECS = 10.0
  START_ATTEMPTS = 5 # a port found free can be taken before the server binds it

  def self.on_path(name)
    ENV.fetch('PATH', '').split(':').map { |d| File.join(d, name) }.find { |p| File.executable?(p) }
  end

  def self.binary(kind)
    path = if kind == 'memcached'
             ENV['MEMCACHED_BIN'] || on_path('memcached') || '/usr/bin/memcached'
           else
             ENV['MEMCRAB_BIN'] || File.expand_path('../../target/release/memcrab', __dir__)
           end
    raise "#{kind} binary not found at #{path}" unless File.executable?(path)

    path
  end

  def self.free_port
    s = TCPServer.new('127.0.0.1', 0)
    s.addr[1]
  ensure
    s&.close
  end

  # A running server; `address` is what Dalli takes.
  class Server
    attr_reader :kind, :pid, :port, :log_path

    def initialize(kind, pid, port, log_path)
      @kind = kind
      @pid = pid
      @port = port
      @log_path = log_path
      @status = nil
    end

    def address
      "127.0.0.1:#{port}"
    end

    def alive?
      return false if @status

      @status = Process.wait2(pid, Process::WNOHANG)&.last
      @status.nil?
    end

    # SIGKILL to the whole group (kill -9, as a crash), then reap it.
    def kill
      RUNNING.delete(self)
      return unless alive?

      begin
        Process.kill('KILL', -pid)
      rescue Errno::ESRCH
        nil # already gone
      end
      @status = Process.wait2(pid).last
    ensure
      FileUtils.rm_f(log_path)
    end

    def log
      File.exist?(log_path) ? File.read(log_path) : ''
    end
  end

  RUNNING = []
  at_exit { RUNNING.dup.each(&:kill) }

  def self.wait_ready(server)
    deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + READY_TIMEOUT_SECS
    loop do
      raise "#{server.kind} exited before accepting connections:\n#{server.log}" unless server.alive?

      begin
        TCPSocket.new('127.0.0.1', server.port).close
        return if server.alive?
      rescue SystemCallError
        if Process.clock_gettime(Process::CLOCK_MONOTONIC) > deadline
          raise "#{server.kind} did not accept within #{READY_TIMEOUT_SECS}s:\n#{server.log}"
        end

        sleep 0.005
      end
    end
  end

  # Starts `kind` with memcached's flags plus `extra` and `env` added to the
  # environment; returns once it accepts connections.
  def self.start(kind, extra = [], env = {})
    bin = binary(kind)
    failure = nil
    START_ATTEMPTS.times do |attempt|
      port = free_port
      args = ['-U', '0', '-l', '127.0.0.1', '-p', port.to_s, *extra]
      # memcached refuses to run as root without -u; memcrab accepts it.
      args += %w[-u root] if Process.euid.zero?
      log_path = File.join(Dir.tmpdir, "memcrab-ruby-#{kind}-#{Process.pid}-#{port}-#{attempt}.log")
      pid = Process.spawn(env, bin, *args, in: File::NULL, %i[out err] => log_path, pgroup: true)
      server = Server.new(kind, pid, port, log_path)
      RUNNING << server
      begin
        wait_ready(server)
        return server
      rescue RuntimeError => e
        server.kill
        failure = e
        break unless e.message =~ /in use/i
      end
    end
    raise failure
  end

  # The users' passwords in both forms, in a new scratch directory: a cyrus
  # sasldb for Debian's memcached (built against cyrus SASL, it reads no plain
  # file) and the `user:password` file memcrab reads from MEMCACHED_SASL_PWDB.
  # Returns [dir, env] for start(kind, ['-S'], env).
  def self.sasl_env(users)
    dir = Dir.mktmpdir('memcrab-ruby-sasl-')
    sasldb = File.join(dir, 'sasldb2')
    saslpasswd2 = on_path('saslpasswd2') || '/usr/sbin/saslpasswd2'
    users.each do |user, pass|
      _, err, status = Open3.capture3(saslpasswd2, '-p', '-c', '-f', sasldb, '-a', 'memcached', user,
                                      stdin_data: pass)
      raise "saslpasswd2 (sasl2-bin) failed: #{err}" unless status.success?
    end
    pwdb = File.join(dir, 'pwdb')
    File.write(pwdb, users.map { |u, p| "#{u}:#{p}\n" }.join)
    File.write(File.join(dir, 'memcached.conf'), "mech_list: plain\nsasldb_path: #{sasldb}\n")
    [dir, { 'MEMCACHED_SASL_PWDB' => pwdb, 'SASL_CONF_PATH' => dir }]
  end

  # One text-protocol request on a fresh connection, read until `until_suffix`:
  # a look at the server past the client under test.
  def self.raw(port, request, until_suffix = "END\r\n", timeout_secs = 5)
    sock = TCPSocket.new('127.0.0.1', port)
    sock.write(request)
    got = +''
    deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + timeout_secs
    until got.end_with?(until_suffix)
      left = deadline - Process.clock_gettime(Process::CLOCK_MONOTONIC)
      raise "no #{until_suffix.inspect} after #{request.inspect}: #{got.inspect}" if left <= 0
      next unless sock.wait_readable(left)

      got << sock.readpartial(1 << 20)
    end
    got.b
  ensure
    sock&.close
  end
end
