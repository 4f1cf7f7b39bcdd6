# frozen_string_literal: true

# Rails' cache store, as a Rails application uses it: Debian's
# ruby-activesupport (6.1) `ActiveSupport::Cache::MemCacheStore` over Debian's
# ruby-dalli, against memcached (the oracle) and memcrab, with the same
# assertions for both servers. What `Rails.cache` does: read/write/fetch with
# its entries (Marshal'd, compressed over 1 KB), expiry, versions, counters,
# multi-key calls, namespaces, key normalisation, clear, and a server that dies.
#
# Run: ruby tests/ruby/rails_cache_test.rb (binaries: see servers.rb).

require 'logger'
require 'minitest/autorun'
require 'active_support'
require 'active_support/cache'
require 'active_support/cache/mem_cache_store'
require 'dalli'
require_relative 'servers'

Dalli.logger = Logger.new(nil)

# The tests every server kind runs; `kind` comes from the class.
module RailsCacheCases
  def setup
    @server = Servers.start(kind)
    @cache = store
  end

  def teardown
    @server&.kill
  end

  def store(**options)
    ActiveSupport::Cache::MemCacheStore.new(@server.address, socket_timeout: 5, **options)
  end

  def test_read_write_fetch_delete
    assert_nil @cache.read('missing')
    assert @cache.write('user/1', { name: 'Ann', roles: %i[admin] })
    assert_equal({ name: 'Ann', roles: %i[admin] }, @cache.read('user/1'))
    assert @cache.exist?('user/1')
    calls = 0
    2.times { assert_equal 'computed', @cache.fetch('page') { calls += 1; 'computed' } }
    assert_equal 1, calls, 'the second fetch is a hit'
    assert_equal 'again', @cache.fetch('page', force: true) { 'again' }
    assert @cache.delete('page')
    refute @cache.exist?('page')
    # unless_exist is memcached's add.
    refute @cache.write('user/1', 'other', unless_exist: true)
    assert @cache.write('fresh', 'v', unless_exist: true)
    assert_equal 'v', @cache.read('fresh')
  end

  def test_counters
    assert_nil @cache.increment('hits') # no counter yet: Dalli's incr without a default
    assert @cache.write('hits', '5', raw: true)
    assert_equal 6, @cache.increment('hits')
    assert_equal 16, @cache.increment('hits', 10)
    assert_equal 13, @cache.decrement('hits', 3)
    assert_equal 0, @cache.decrement('hits', 100)
    assert_equal '0', @cache.read('hits', raw: true).strip
  end

  def test_multi_key_calls
    values = (1..50).to_h { |i| ["k#{i}", "v#{i}"] }
    @cache.write_multi(values)
    assert_equal values, @cache.read_multi(*values.keys, 'absent')
    got = @cache.fetch_multi('k1', 'new1', 'new2') { |key| "made #{key}" }
    assert_equal({ 'k1' => 'v1', 'new1' => 'made new1', 'new2' => 'made new2' }, got)
    assert_equal 'made new2', @cache.read('new2')
  end

  def test_expiry_and_versions
    # A TTL of 2: the servers' clocks tick once a second, so a TTL of 1 can run out
    # before the next request; this one lives 1-2 s, polled to 6 s.
    @cache.write('short', 'v', expires_in: 2)
    assert_equal 'v', @cache.read('short')
    deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + 6
    sleep 0.05 until @cache.read('short').nil? || Process.clock_gettime(Process::CLOCK_MONOTONIC) > deadline
    assert_nil @cache.read('short')
    # Cache versioning: an entry written for version 1 is a miss for version 2.
    @cache.write('doc', 'old', version: 1)
    assert_equal 'old', @cache.read('doc', version: 1)
    assert_nil @cache.read('doc', version: 2)
  end

  def test_keys_values_namespace_and_clear
    # Whitespace is escaped and over-long keys are shortened with a digest.
    @cache.write('with space', 'v1')
    assert_equal 'v1', @cache.read('with space')
    @cache.write('x' * 400, 'v2')
    assert_equal 'v2', @cache.read('x' * 400)
    big = 'abcdefghij' * 100_000 # 1 MB, compressed by the store
    assert @cache.write('big', big)
    assert_equal big, @cache.read('big')
    bytes = (0..255).map(&:chr).join.b * 10
    @cache.write('bytes', bytes)
    assert_equal bytes, @cache.read('bytes')
    app = store(namespace: 'app')
    app.write('k', 'namespaced')
    assert_equal 'namespaced', app.read('k')
    assert_nil @cache.read('k')
    assert_match(/\AVALUE app:k /, Servers.raw(@server.port, "get app:k\r\n"))
    assert @cache.stats[@server.address]['curr_items'].to_i >= 5
    @cache.clear
    assert_nil @cache.read('with space')
    assert_nil app.read('k')
  end

  def test_a_dead_server_is_a_miss_not_an_exception
    @cache.write('k', 'v')
    @server.kill
    # Rails' store rescues Dalli's errors: reads miss, writes report false.
    started = Process.clock_gettime(Process::CLOCK_MONOTONIC)
    assert_nil @cache.read('k')
    refute @cache.write('k', 'v2')
    assert_equal 'computed', @cache.fetch('k') { 'computed' }
    assert_operator Process.clock_gettime(Process::CLOCK_MONOTONIC) - started, :<, 10
  end
end

Servers::KINDS.each do |kind|
  klass = Class.new(Minitest::Test) do
    include RailsCacheCases
    define_method(:kind) { kind }
  end
  Object.const_set("RailsCache#{kind.capitalize}Test", klass)
end
