# frozen_string_literal: true

# Debian's ruby-dalli (Dalli 3.0.6, the client under Rails' :mem_cache_store)
# against memcached (the oracle) and memcrab, with the same assertions for both
# servers. Dalli 3.0 speaks only the binary protocol (its meta protocol came in
# 3.2, which Debian does not ship): every Client method over it, Marshal and raw
# values, compression, namespaces, SASL PLAIN, and its ring over three servers
# with a server killed by SIGKILL.
#
# Run: ruby tests/ruby/dalli_test.rb (binaries: see servers.rb).

require 'logger'
require 'minitest/autorun'
require 'dalli'
require_relative 'servers'

Dalli.logger = Logger.new(nil)

# The loopback answers in microseconds; the generous timeout is for two busy
# cores running several suites at once.
OPTS = { socket_timeout: 5, compress: false }.freeze

# The tests every server kind runs; `kind` comes from the class.
module DalliCases
  def setup
    @server = Servers.start(kind)
    @dc = Dalli::Client.new(@server.address, OPTS)
  end

  def teardown
    @dc&.close
    @server&.kill
  end

  def raw(request, until_suffix = "END\r\n")
    Servers.raw(@server.port, request, until_suffix)
  end

  # Polls `get` under a deadline until the key is gone: the servers' clocks
  # tick once a second, so a 1 s TTL ends within 1-2 s.
  def assert_expires(key, within_secs: 5)
    deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + within_secs
    value = :present
    until value.nil? || Process.clock_gettime(Process::CLOCK_MONOTONIC) > deadline
      sleep 0.05
      value = @dc.get(key)
    end
    assert_nil value, "#{key} still there after #{within_secs} s"
  end

  def test_get_set_marshal_and_raw
    assert_nil @dc.get('missing')
    obj = { a: [1, 'b'], c: :sym, d: 2.5, e: nil }
    assert @dc.set('obj', obj)
    assert_equal obj, @dc.get('obj')
    assert @dc.set('raw', 'text', nil, raw: true)
    assert_equal 'text', @dc.get('raw')
    # Dalli's flags: 1 = Marshal'd, 0 = raw; written as the item's flags.
    assert_match(/\AVALUE obj 1 \d+\r\n/, raw("get obj\r\n"))
    assert_equal "VALUE raw 0 4\r\ntext\r\nEND\r\n", raw("get raw\r\n")
    assert @dc.set('empty', '', nil, raw: true)
    assert_equal '', @dc.get('empty')
  end

  def test_add_replace_append_prepend
    # A replace of a missing key is KEY_NOT_FOUND, whose CAS field is 0: Dalli
    # 3.0.6 returns that CAS (0, truthy in Ruby) rather than false.
    assert_equal 0, @dc.replace('k', 'v', nil, raw: true)
    assert_nil @dc.get('k')
    assert @dc.add('k', 'mid', nil, raw: true)
    refute @dc.add('k', 'again', nil, raw: true)
    refute @dc.append('missing', 'x')
    assert @dc.append('k', '>')
    assert @dc.prepend('k', '<')
    assert_equal '<mid>', @dc.get('k', raw: true)
    assert @dc.replace('k', 'new', nil, raw: true)
    assert_equal 'new', @dc.get('k', raw: true)
  end

  def test_cas
    assert_nil(@dc.cas('missing') { |v| v })
    @dc.set('k', 1)
    assert(@dc.cas('k') { |v| v + 1 })
    assert_equal 2, @dc.get('k')
    value, unique = @dc.get_cas('k')
    assert_equal 2, value
    assert_operator unique, :>, 0
    @dc.set('k', 3) # someone else writes: the unique moves on
    refute @dc.set_cas('k', 99, unique)
    refute @dc.replace_cas('k', 99, unique)
    refute @dc.delete_cas('k', unique)
    value, unique = @dc.get_cas('k')
    assert_equal 3, value
    new_unique = @dc.set_cas('k', 4, unique)
    assert new_unique
    refute_equal unique, new_unique
    assert(@dc.cas!('fresh') { |v| v.nil? ? 'made' : 'seen' })
    assert_equal 'made', @dc.get('fresh')
    assert @dc.delete_cas('k', new_unique)
    assert_nil @dc.get('k')
  end

  def test_incr_decr
    assert_nil @dc.incr('n', 1)
    assert_equal 10, @dc.incr('n', 1, nil, 10) # a miss stores the default
    assert_equal 15, @dc.incr('n', 5)
    assert_equal 0, @dc.decr('n', 100) # counters stop at 0
    assert_equal 7, @dc.decr('d', 1, nil, 7)
    @dc.set('big', '18446744073709551615', nil, raw: true)
    assert_equal 1, @dc.incr('big', 2) # 2^64 wraps
    @dc.set('word', 'abc', nil, raw: true)
    assert_raises(Dalli::DalliError) { @dc.incr('word', 1) }
  end

  def test_delete_touch_gat_and_ttl
    refute @dc.delete('k')
    @dc.set('k', 'v')
    assert @dc.delete('k')
    assert_nil @dc.get('k')
    assert_nil @dc.touch('missing', 100)
    @dc.set('k', 'v')
    assert @dc.touch('k', 100)
    assert_equal 'v', @dc.gat('k', 100)
    assert_nil @dc.gat('missing', 100)
    # A TTL of 2: with whole-second clocks a TTL of 1 can run out before the next
    # request; one of 2 lives 1-2 s.
    @dc.set('short', 'v', 2)
    assert_equal 'v', @dc.get('short')
    assert_expires('short')
    @dc.set('touched', 'v')
    assert_equal 'v', @dc.gat('touched', 1)
    assert_expires('touched')
  end

  def test_multi_get_quiet_multi_and_flush
    keys = (0...100).map { |i| "key:#{i}" }
    # Dalli's multi block sends quiet (no-reply) sets, pipelined.
    @dc.multi { keys.each_with_index { |k, i| @dc.set(k, "value #{i}") } }
    got = @dc.get_multi(*keys, 'absent')
    assert_equal keys.each_with_index.to_h { |k, i| [k, "value #{i}"] }, got
    with_cas = @dc.get_multi_cas('key:1', 'key:2', 'absent')
    assert_equal %w[key:1 key:2], with_cas.keys.sort
    assert_equal 'value 1', with_cas['key:1'][0]
    assert_operator with_cas['key:1'][1], :>, 0
    @dc.flush
    assert_equal({}, @dc.get_multi(*keys))
  end

  def test_binary_safe_values_and_keys
    bytes = (0..255).map(&:chr).join.b * 4 + "\r\nEND\r\n\0"
    assert @dc.set('bin', bytes, nil, raw: true)
    assert_equal bytes, @dc.get('bin', raw: true).b
    assert @dc.set('utf8', "ünïcødé \u2603")
    assert_equal "ünïcødé \u2603", @dc.get('utf8')
    # Binary-protocol keys may hold spaces (the text protocol's may not).
    assert @dc.set('with space', 'v')
    assert_equal 'v', @dc.get('with space')
    # Over 250 bytes Dalli sends a digest of the key instead.
    long = 'k' * 300
    assert @dc.set(long, 'v')
    assert_equal 'v', @dc.get(long)
  end

  def test_large_and_too_large_values
    big = 'x' * 1_000_000
    assert @dc.set('big', big, nil, raw: true)
    assert_equal big, @dc.get('big', raw: true)
    # Past Dalli's own limit it refuses before sending; with the limit raised
    # the server answers E2BIG and the connection stays usable.
    assert_raises(Dalli::ValueOverMaxSize) { @dc.set('huge', 'y' * (1024 * 1024 + 1), nil, raw: true) }
    loose = Dalli::Client.new(@server.address, OPTS.merge(value_max_bytes: 4 * 1024 * 1024))
    begin
      error = assert_raises(Dalli::DalliError) { loose.set('huge', 'y' * (1024 * 1024 + 1), nil, raw: true) }
      assert_match(/Value too large/, error.message)
      assert_equal big, loose.get('big', raw: true)
    ensure
      loose.close
    end
    assert_nil @dc.get('huge')
  end

  def test_compression_and_namespace
    dc = Dalli::Client.new(@server.address, OPTS.merge(compress: true, namespace: 'app'))
    begin
      text = 'abc' * 10_000
      assert dc.set('doc', text)
      assert_equal text, dc.get('doc')
      # Stored under the namespace, Marshal'd (1) and zlib-compressed (2).
      reply = raw("get app:doc\r\n")
      header = reply[/\AVALUE app:doc (\d+) (\d+)\r\n/]
      refute_nil header, reply[0, 80]
      assert_equal 3, Regexp.last_match(1).to_i
      assert_operator Regexp.last_match(2).to_i, :<, 1000
      assert_nil @dc.get('doc')
    ensure
      dc.close
    end
  end

  def test_stats_version_reset
    @dc.set('a', '1')
    stats = @dc.stats[@server.address]
    assert_equal '1', stats['curr_items']
    assert_equal '1', stats['cmd_set']
    assert_equal '64', (stats['limit_maxbytes'].to_i / (1024 * 1024)).to_s
    assert_equal 'yes', @dc.stats(:settings)[@server.address]['cas_enabled']
    @dc.reset_stats
    assert_equal '0', @dc.stats[@server.address]['cmd_set']
    # The release, as memcached writes it: X.Y.Z and nothing after it.
    assert_match(/\A1\.6\.\d+\z/, @dc.version[@server.address])
    assert @dc.alive!
  end
end

# SASL PLAIN over the binary protocol, against a `-S` server.
module DalliSaslCases
  USERS = { 'alice' => 's3cret' }.freeze

  def setup
    @dir, env = Servers.sasl_env(USERS)
    @server = Servers.start(kind, ['-S'], env)
  end

  def teardown
    @server&.kill
    FileUtils.rm_rf(@dir) if @dir
  end

  def client(user, pass)
    Dalli::Client.new(@server.address, OPTS.merge(username: user, password: pass, socket_max_failures: 1))
  end

  def test_right_password_unlocks_commands
    dc = client('alice', 's3cret')
    assert dc.set('k', 'v')
    assert_equal 'v', dc.get('k')
    assert_equal 5, dc.incr('n', 1, nil, 5)
  ensure
    dc&.close
  end

  def test_wrong_password_unknown_user_and_none_are_refused
    [%w[alice wrong], %w[bob s3cret], [nil, nil]].each do |user, pass|
      dc = client(user, pass)
      begin
        assert_raises(Dalli::DalliError, Dalli::RingError, "user #{user.inspect}") { dc.set('k', 'v') }
      ensure
        dc.close
      end
    end
  end
end

# Dalli's ring (consistent hashing with CRC32 points) over three servers, and
# its failover when one is killed with SIGKILL while the client keeps going.
module DalliRingCases
  def setup
    @servers = Array.new(3) { Servers.start(kind) }
  end

  def teardown
    @servers&.each(&:kill)
  end

  def holders(key)
    @servers.select(&:alive?).reject { |s| Servers.raw(s.port, "get #{key}\r\n") == "END\r\n" }.map(&:address)
  end

  def test_keys_spread_and_fail_over_when_a_server_dies
    dc = Dalli::Client.new(@servers.map(&:address),
                           OPTS.merge(socket_max_failures: 1, socket_failure_delay: 0.01, down_retry_delay: 60))
    keys = (0...60).map { |i| "item:#{i}" }
    keys.each { |k| assert dc.set(k, "v:#{k}", nil, raw: true) }
    where = keys.to_h { |k| [k, holders(k)] }
    where.each { |k, h| assert_equal 1, h.size, "#{k} on #{h}" }
    counts = where.values.flatten.tally
    @servers.each { |s| assert_operator counts.fetch(s.address, 0), :>=, 5, counts.inspect }

    victim = @servers[1]
    dead_keys = keys.select { |k| where[k] == [victim.address] }
    live_keys = keys - dead_keys
    victim.kill # kill -9: no goodbye on its connections

    # Every read is bounded by socket_timeout; the loop by count.
    live_keys.each { |k| assert_equal "v:#{k}", dc.get(k, raw: true), k }
    dead_keys.each do |k|
      # The dead server's keys fail over to a live server: a miss, then stored.
      assert_nil dc.get(k, raw: true)
      assert dc.set(k, "new:#{k}", nil, raw: true)
      assert_equal "new:#{k}", dc.get(k, raw: true)
      moved = holders(k)
      assert_equal 1, moved.size
      refute_equal victim.address, moved.first
    end
    live_keys.each { |k| assert_equal "v:#{k}", dc.get(k, raw: true), k }
  ensure
    dc&.close
  end
end

Servers::KINDS.each do |kind|
  { 'Dalli' => DalliCases, 'DalliSasl' => DalliSaslCases, 'DalliRing' => DalliRingCases }.each do |name, cases|
    klass = Class.new(Minitest::Test) do
      include cases
      define_method(:kind) { kind }
    end
    Object.const_set("#{name}#{kind.capitalize}Test", klass)
  end
end
